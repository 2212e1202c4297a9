// The device buffers a GPU forward pass works in, sized once for up to `max_tokens` tokens, and its
// per-call inputs (token ids, positions, where each token's K/V goes, the block table), staged in
// pinned host memory and uploaded with one copy.
//
// Inputs are laid out for n tokens as [token_slots n (int64)][ids n][positions n][q_indptr 2]
// [kv_len 1 + pad][block table], so for a given n every address is fixed: a graph recorded for
// n = 1 reads the inputs of whatever step was uploaded before its replay.
//
// A batched step (forward_batch.h) has buffers of its own, grown to the largest batch seen (its
// block tables are batch x the batch's longest table, which no fixed size bounds), so the
// single-sequence inputs — and the graphs recorded over them — never move.
//
// Thread-safety: not thread-safe; one owner (the model), one stream.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "engine/forward_batch.h"
#include "engine/model_config.h"
#include "kernels/gpu_runtime.h"

namespace kvtier::engine {

// Device addresses of one call's inputs (n tokens of `batch` sequences; a single-sequence call is
// a batch of one).
struct StepInputs {
  int64_t n = 0;
  int64_t batch = 1;
  int64_t max_blocks = 0;                 // the stride of block_tables
  const int64_t* token_slots = nullptr;   // [n]  slot * block_tokens + row of token i's K/V
  const int32_t* ids = nullptr;           // [n]
  const int32_t* positions = nullptr;     // [n]
  const int32_t* q_indptr = nullptr;      // [batch + 1]
  const int32_t* kv_lens = nullptr;       // [batch]  start + n of each sequence
  const int32_t* block_tables = nullptr;  // [batch, max_blocks]
};

class GpuScratch {
 public:
  // Query rows (a step's sequences x its longest chunk) up to which the attention workspaces also
  // hold the prefill's full split over the keys (AttentionPrefillWorkspaceBytes): a short chunk
  // after a long cached prefix. Larger steps split less or not at all; their query tiles fill
  // the device anyway.
  static constexpr int64_t kSplitPrefillRows = 64;

  // For up to max_tokens tokens a call and block tables of up to max_blocks entries.
  static absl::StatusOr<std::unique_ptr<GpuScratch>> Create(const ModelConfig& config,
                                                            int64_t max_tokens, int64_t max_blocks);
  ~GpuScratch();
  GpuScratch(const GpuScratch&) = delete;
  GpuScratch& operator=(const GpuScratch&) = delete;

  // Stages tokens (positions start..) and the first ceil((start + n) / block_tokens) entries of
  // block_table, then enqueues their upload on `stream`. Waits first until the previous upload has
  // read the staging memory. Preconditions (checked by the model): 1 <= n <= max_tokens, the
  // table holds enough entries and at most max_blocks.
  absl::StatusOr<StepInputs> Upload(std::span<const int32_t> tokens, int64_t start,
                                    std::span<const int32_t> block_table, int64_t block_tokens,
                                    gpu::StreamHandle stream);
  // The addresses Upload uses for n tokens, without uploading (what a graph records).
  StepInputs InputsFor(int64_t n) const;

  // Stages a batched step's plan and enqueues its upload on `stream`, growing the batch buffers
  // first when the plan does not fit (waiting for the device, as enqueued work may read them).
  // Also sizes batch_decode_workspace for plan.batch sequences (and the prefill's split, up to
  // kSplitPrefillRows rows). Precondition: plan.total <= max_tokens.
  absl::StatusOr<StepInputs> UploadPlan(const ForwardPlan& plan, const ModelConfig& config,
                                        gpu::StreamHandle stream);
  void* batch_decode_workspace() const { return batch_workspace_; }
  int64_t batch_decode_workspace_bytes() const { return batch_workspace_bytes_; }

  int64_t max_tokens() const { return max_tokens_; }
  int64_t max_blocks() const { return max_blocks_; }

  // Activations, 16-bit, [max_tokens, ...].
  void* residual = nullptr;          // [hidden]  the residual stream
  void* h = nullptr;                 // [hidden]  a sublayer's input, then its output
  void* qkv = nullptr;               // [q_dim + 2 kv_dim]
  void* attn = nullptr;              // [q_dim]
  void* gate_up = nullptr;           // [max(2 intermediate, hidden)]: a batched step gathers
                                     // its last tokens' rows here for the LM head
  void* act = nullptr;               // [intermediate]
  void* decode_workspace = nullptr;  // AttentionDecode's split results, and AttentionPrefill's
                                     // for up to min(max_tokens, kSplitPrefillRows) rows
  int64_t decode_workspace_bytes = 0;

  // Logits, float32 [rows, vocab], room for at least `rows` rows: grown when needed (waiting for
  // the device first, as enqueued work may still read the old buffer), else the same buffer.
  absl::StatusOr<float*> EnsureLogitsRows(int64_t rows);

 private:
  GpuScratch() = default;
  int64_t InputBytes(int64_t n, int64_t blocks) const;
  // Grows a device buffer and its pinned staging twin to `bytes` (synchronizing first).
  absl::Status EnsureBatchBytes(int64_t bytes);
  absl::Status EnsureBatchWorkspace(int64_t bytes);

  int64_t max_tokens_ = 0;
  int64_t max_blocks_ = 0;
  int64_t vocab_ = 0;
  void* arena_ = nullptr;    // activations and the decode workspace
  void* inputs_ = nullptr;   // device copy of the staged inputs
  void* staging_ = nullptr;  // pinned
  gpu::Event staged_;        // the last upload has read staging_
  float* logits_ = nullptr;
  int64_t logits_rows_ = 0;
  void* batch_inputs_ = nullptr;   // device copy of a batched step's staged plan
  void* batch_staging_ = nullptr;  // pinned
  int64_t batch_bytes_ = 0;
  gpu::Event batch_staged_;  // the last batched upload has read batch_staging_
  void* batch_workspace_ = nullptr;
  int64_t batch_workspace_bytes_ = 0;
};

}  // namespace kvtier::engine
