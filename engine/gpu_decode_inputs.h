// The inputs of a batched decode step replayed from a graph (gpu_decode_graphs.h): device buffers
// at addresses that stay put from step to step, so that a graph recorded for a (batch-size bucket,
// context bucket) reads whatever step was uploaded before its replay.
//
// A step of `batch` sequences, each decoding one token, runs as BatchBucket(batch) rows: the real
// ones first, then padding rows that must do nothing harmful. A padding row is token 0 at position
// 0 with a context of one token, and its K/V goes to a scratch slot of this class's own (the "trash
// slot") instead of one of the pool's: RopeAndWriteKv writes a token's K/V at pool + slot * slot
// size, so the slot index is chosen so that this address falls in the trash buffer (device
// pointers are flat addresses; the index is checked to fit the int32 block tables). Its attention
// reads back only what it wrote there. Its logits row is computed and ignored.
//
// Layout for `rows` rows and block tables of `stride` entries (GpuScratch's batched layout):
// [token_slots rows (int64)][ids rows][positions rows][q_indptr rows + 1][kv_lens rows]
// [block_tables rows x stride].
//
// Thread-safety: not thread-safe; one owner (the model), one stream.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "engine/forward_batch.h"
#include "engine/gpu_kv_pool.h"
#include "engine/gpu_scratch.h"
#include "engine/model_config.h"
#include "kernels/gpu_runtime.h"

namespace kvtier::engine {

class GpuDecodeInputs {
 public:
  // The largest batch replayed from a graph (a larger one runs kernel by kernel).
  static constexpr int64_t kMaxBatch = 512;
  // The rows a decode step of `batch` sequences runs as: 1, 2, 4, then multiples of 8 up to 64,
  // of 16 up to 128, of 32 up to 256, of 64 up to kMaxBatch (few graphs, little padding).
  static int64_t BatchBucket(int64_t batch);

  GpuDecodeInputs() = default;
  ~GpuDecodeInputs();
  GpuDecodeInputs(const GpuDecodeInputs&) = delete;
  GpuDecodeInputs& operator=(const GpuDecodeInputs&) = delete;

  // Stages the decode-only `plan` (plan.batch <= rows <= kMaxBatch; every kv_len <= stride *
  // block_tokens) as `rows` rows with padding, and enqueues the upload on `stream`. Waits first
  // until the previous upload has read the staging memory. The buffers are allocated on first use
  // for kMaxBatch rows and tables of max_stride entries (the longest a step can need), so they do
  // not move as contexts grow; the decode attention workspace grows, doubling, with the rows (it
  // waits for the device first: enqueued work may read it). Either move changes base() or
  // workspace(), which drops the recordings. OutOfRange when no trash slot index fits an int32
  // for this pool (the step must run without a graph).
  absl::StatusOr<StepInputs> Upload(const ForwardPlan& plan, int64_t rows, int64_t stride,
                                    int64_t max_stride, const ModelConfig& config,
                                    const GpuKvPool& pool, gpu::StreamHandle stream);

  const void* base() const { return device_; }
  void* workspace() const { return workspace_; }
  int64_t workspace_bytes() const { return workspace_bytes_; }

 private:
  // Grows (device_, staging_) to `bytes`, workspace_ to at least `workspace_bytes` (doubling),
  // trash_ to `trash_bytes`.
  absl::Status Ensure(int64_t bytes, int64_t workspace_bytes, int64_t trash_bytes);
  // The slot index whose address in `pool` is inside trash_ (a whole slot of it).
  absl::StatusOr<int32_t> TrashSlot(const GpuKvPool& pool) const;

  void* device_ = nullptr;   // the inputs, [bytes_]
  void* staging_ = nullptr;  // pinned twin of device_
  int64_t bytes_ = 0;
  gpu::Event staged_;  // the last upload has read staging_ (empty before the first)
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  void* trash_ = nullptr;  // two slots' bytes: room for one whole slot at a slot-sized step
  int64_t trash_bytes_ = 0;
};

}  // namespace kvtier::engine
