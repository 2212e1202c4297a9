#include "engine/gpu_decode_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "kernels/ops/gpu/attention_gpu.h"

namespace kvtier::engine {

int64_t GpuDecodeInputs::BatchBucket(int64_t batch) {
  if (batch <= 2) return batch;
  if (batch <= 4) return 4;
  const int64_t step = batch <= 64 ? 8 : batch <= 128 ? 16 : batch <= 256 ? 32 : 64;
  return (batch + step - 1) / step * step;
}

GpuDecodeInputs::~GpuDecodeInputs() {
  if (staged_.handle() != nullptr) (void)staged_.Synchronize();
  (void)gpu::DeviceSynchronize();  // a replay in flight may still read or write these
  (void)gpu::DeviceFree(trash_);
  (void)gpu::DeviceFree(workspace_);
  (void)gpu::PinnedFree(staging_);
  (void)gpu::DeviceFree(device_);
}

absl::Status GpuDecodeInputs::Ensure(int64_t bytes, int64_t workspace_bytes, int64_t trash_bytes) {
  if (staged_.handle() == nullptr) {
    KVTIER_ASSIGN_OR_RETURN(staged_, gpu::Event::Create());
  }
  if (bytes <= bytes_ && workspace_bytes <= workspace_bytes_ && trash_bytes <= trash_bytes_) {
    return absl::OkStatus();
  }
  KVTIER_RETURN_IF_ERROR(gpu::DeviceSynchronize());  // enqueued work may read the old buffers
  if (bytes > bytes_) {
    const int64_t grown = std::max(bytes, 2 * bytes_);
    KVTIER_RETURN_IF_ERROR(gpu::PinnedFree(staging_));
    KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(device_));
    staging_ = device_ = nullptr;
    bytes_ = 0;
    KVTIER_ASSIGN_OR_RETURN(device_, gpu::DeviceAlloc(static_cast<size_t>(grown)));
    KVTIER_ASSIGN_OR_RETURN(staging_, gpu::PinnedAlloc(static_cast<size_t>(grown)));
    bytes_ = grown;
  }
  if (workspace_bytes > workspace_bytes_) {
    const int64_t grown = std::max(workspace_bytes, 2 * workspace_bytes_);
    KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(workspace_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    KVTIER_ASSIGN_OR_RETURN(workspace_, gpu::DeviceAlloc(static_cast<size_t>(grown)));
    workspace_bytes_ = grown;
  }
  if (trash_bytes > trash_bytes_) {
    KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(trash_));
    trash_ = nullptr;
    trash_bytes_ = 0;
    KVTIER_ASSIGN_OR_RETURN(trash_, gpu::DeviceAlloc(static_cast<size_t>(trash_bytes)));
    trash_bytes_ = trash_bytes;
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> GpuDecodeInputs::TrashSlot(const GpuKvPool& pool) const {
  const int64_t slot_bytes = pool.geometry().slot_elems() * 2;
  const int64_t d = static_cast<int64_t>(reinterpret_cast<intptr_t>(trash_) -
                                         reinterpret_cast<intptr_t>(pool.data()));
  // The smallest s with pool + s * slot_bytes >= trash_: that slot lies inside the two slots of
  // trash_ (ceiling division, for either sign of d).
  const int64_t s = d >= 0 ? (d + slot_bytes - 1) / slot_bytes : -((-d) / slot_bytes);
  if (s < INT32_MIN || s > INT32_MAX) {
    return absl::OutOfRangeError(fmt::format(
        "GpuDecodeInputs: the padding rows' scratch slot is {} slots from the KV pool, past the "
        "block tables' int32",
        s));
  }
  return static_cast<int32_t>(s);
}

absl::StatusOr<StepInputs> GpuDecodeInputs::Upload(const ForwardPlan& plan, int64_t rows,
                                                   int64_t stride, int64_t max_stride,
                                                   const ModelConfig& config, const GpuKvPool& pool,
                                                   gpu::StreamHandle stream) {
  const int64_t b = plan.batch, bt = pool.geometry().block_tokens;
  const int64_t ids = 8 * rows, positions = 12 * rows, indptr = 16 * rows,
                kv_lens = indptr + 4 * (rows + 1), table = kv_lens + 4 * rows,
                bytes = table + 4 * rows * stride;
  // The same layout's size for the most rows and the longest tables.
  const int64_t most_bytes = 24 * kMaxBatch + 4 + 4 * kMaxBatch * std::max(stride, max_stride);
  const ops::AttentionParams params{.kv = {.layers = 1,
                                           .block_tokens = 1,
                                           .kv_heads = config.num_kv_heads,
                                           .head_dim = config.head_dim},
                                    .q_heads = config.num_heads};
  if (staged_.handle() != nullptr) {
    KVTIER_RETURN_IF_ERROR(staged_.Synchronize());  // the last upload has read the staging
  }
  KVTIER_RETURN_IF_ERROR(Ensure(std::max(bytes, most_bytes),
                                ops::gpu::AttentionDecodeWorkspaceBytes(params, rows),
                                4 * pool.geometry().slot_elems()));
  KVTIER_ASSIGN_OR_RETURN(const int32_t trash, TrashSlot(pool));
  char* host = static_cast<char*>(staging_);
  auto* h_slots = reinterpret_cast<int64_t*>(host);
  auto* h_ids = reinterpret_cast<int32_t*>(host + ids);
  auto* h_positions = reinterpret_cast<int32_t*>(host + positions);
  auto* h_indptr = reinterpret_cast<int32_t*>(host + indptr);
  auto* h_kv_lens = reinterpret_cast<int32_t*>(host + kv_lens);
  auto* h_table = reinterpret_cast<int32_t*>(host + table);
  std::memcpy(h_slots, plan.token_slots.data(), 8 * b);
  std::memcpy(h_ids, plan.ids.data(), 4 * b);
  std::memcpy(h_positions, plan.positions.data(), 4 * b);
  std::memcpy(h_kv_lens, plan.kv_lens.data(), 4 * b);
  std::fill(h_table, h_table + rows * stride, 0);
  const int64_t copied = std::min(plan.max_blocks, stride);
  for (int64_t r = 0; r < b; ++r) {
    std::memcpy(h_table + r * stride, plan.block_tables.data() + r * plan.max_blocks, 4 * copied);
  }
  for (int64_t r = b; r < rows; ++r) {  // padding: token 0 at position 0 in the trash slot
    h_slots[r] = int64_t{trash} * bt;
    h_ids[r] = 0;
    h_positions[r] = 0;
    h_kv_lens[r] = 1;
    h_table[r * stride] = trash;
  }
  for (int64_t r = 0; r <= rows; ++r) h_indptr[r] = static_cast<int32_t>(r);
  KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(device_, staging_, static_cast<size_t>(bytes), stream));
  KVTIER_RETURN_IF_ERROR(staged_.Record(stream));
  const char* base = static_cast<const char*>(device_);
  return StepInputs{.n = rows,
                    .batch = rows,
                    .max_blocks = stride,
                    .token_slots = reinterpret_cast<const int64_t*>(base),
                    .ids = reinterpret_cast<const int32_t*>(base + ids),
                    .positions = reinterpret_cast<const int32_t*>(base + positions),
                    .q_indptr = reinterpret_cast<const int32_t*>(base + indptr),
                    .kv_lens = reinterpret_cast<const int32_t*>(base + kv_lens),
                    .block_tables = reinterpret_cast<const int32_t*>(base + table)};
}

}  // namespace kvtier::engine
