#include "engine/gpu_scratch.h"

#include <algorithm>
#include <cstring>

#include "kernels/ops/gpu/attention_gpu.h"

namespace kvtier::engine {
namespace {

int64_t Align(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Byte offsets of the inputs for n tokens (see the header's layout).
struct InputOffsets {
  int64_t slots, ids, positions, q_indptr, kv_len, table;
  explicit InputOffsets(int64_t n)
      : slots(0),
        ids(8 * n),
        positions(12 * n),
        q_indptr(16 * n),
        kv_len(16 * n + 8),
        table(16 * n + 16) {}
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuScratch>> GpuScratch::Create(const ModelConfig& c,
                                                               int64_t max_tokens,
                                                               int64_t max_blocks) {
  std::unique_ptr<GpuScratch> s(new GpuScratch());
  s->max_tokens_ = max_tokens;
  s->max_blocks_ = max_blocks;
  s->vocab_ = c.vocab_size;
  const ops::AttentionParams params{
      .kv = {.layers = 1, .block_tokens = 1, .kv_heads = c.num_kv_heads, .head_dim = c.head_dim},
      .q_heads = c.num_heads};
  s->decode_workspace_bytes = std::max(
      ops::gpu::AttentionDecodeWorkspaceBytes(params, 1),
      ops::gpu::AttentionPrefillWorkspaceBytes(params, std::min(max_tokens, kSplitPrefillRows)));
  const int64_t t = max_tokens * 2;  // bytes per element of each token's 16-bit row
  const int64_t sizes[] = {t * c.hidden_size,
                           t * c.hidden_size,
                           t * (c.q_dim() + 2 * c.kv_dim()),
                           t * c.q_dim(),
                           t * std::max(2 * c.intermediate_size, c.hidden_size),
                           t * c.intermediate_size,
                           s->decode_workspace_bytes};
  int64_t total = 0;
  for (int64_t b : sizes) total += Align(b);
  KVTIER_ASSIGN_OR_RETURN(s->arena_, gpu::DeviceAlloc(static_cast<size_t>(total)));
  void** parts[] = {&s->residual,        &s->h, &s->qkv, &s->attn, &s->gate_up, &s->act,
                    &s->decode_workspace};
  int64_t at = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    *parts[i] = static_cast<char*>(s->arena_) + at;
    at += Align(sizes[i]);
  }
  const int64_t input_bytes = s->InputBytes(max_tokens, max_blocks);
  KVTIER_ASSIGN_OR_RETURN(s->inputs_, gpu::DeviceAlloc(static_cast<size_t>(input_bytes)));
  KVTIER_ASSIGN_OR_RETURN(s->staging_, gpu::PinnedAlloc(static_cast<size_t>(input_bytes)));
  KVTIER_ASSIGN_OR_RETURN(s->staged_, gpu::Event::Create());
  KVTIER_ASSIGN_OR_RETURN(s->batch_staged_, gpu::Event::Create());
  KVTIER_RETURN_IF_ERROR(s->EnsureLogitsRows(1).status());
  return s;
}

GpuScratch::~GpuScratch() {
  (void)staged_.Synchronize();
  (void)batch_staged_.Synchronize();
  (void)gpu::DeviceFree(batch_workspace_);
  (void)gpu::PinnedFree(batch_staging_);
  (void)gpu::DeviceFree(batch_inputs_);
  (void)gpu::DeviceFree(logits_);
  (void)gpu::PinnedFree(staging_);
  (void)gpu::DeviceFree(inputs_);
  (void)gpu::DeviceFree(arena_);
}

int64_t GpuScratch::InputBytes(int64_t n, int64_t blocks) const {
  return InputOffsets(n).table + 4 * blocks;
}

StepInputs GpuScratch::InputsFor(int64_t n) const {
  const InputOffsets o(n);
  const char* base = static_cast<const char*>(inputs_);
  return {.n = n,
          .batch = 1,
          .max_blocks = max_blocks_,
          .token_slots = reinterpret_cast<const int64_t*>(base + o.slots),
          .ids = reinterpret_cast<const int32_t*>(base + o.ids),
          .positions = reinterpret_cast<const int32_t*>(base + o.positions),
          .q_indptr = reinterpret_cast<const int32_t*>(base + o.q_indptr),
          .kv_lens = reinterpret_cast<const int32_t*>(base + o.kv_len),
          .block_tables = reinterpret_cast<const int32_t*>(base + o.table)};
}

absl::StatusOr<StepInputs> GpuScratch::Upload(std::span<const int32_t> tokens, int64_t start,
                                              std::span<const int32_t> block_table,
                                              int64_t block_tokens, gpu::StreamHandle stream) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t end = start + n;
  const int64_t blocks = (end + block_tokens - 1) / block_tokens;
  KVTIER_RETURN_IF_ERROR(staged_.Synchronize());  // the previous upload has read staging_
  const InputOffsets o(n);
  char* host = static_cast<char*>(staging_);
  auto* slots = reinterpret_cast<int64_t*>(host + o.slots);
  auto* positions = reinterpret_cast<int32_t*>(host + o.positions);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = start + i;
    slots[i] = int64_t{block_table[pos / block_tokens]} * block_tokens + pos % block_tokens;
    positions[i] = static_cast<int32_t>(pos);
  }
  std::memcpy(host + o.ids, tokens.data(), 4 * n);
  const int32_t indptr_and_len[3] = {0, static_cast<int32_t>(n), static_cast<int32_t>(end)};
  std::memcpy(host + o.q_indptr, indptr_and_len, sizeof(indptr_and_len));
  std::memcpy(host + o.table, block_table.data(), 4 * blocks);
  KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(inputs_, staging_, InputBytes(n, blocks), stream));
  KVTIER_RETURN_IF_ERROR(staged_.Record(stream));
  return InputsFor(n);
}

absl::Status GpuScratch::EnsureBatchBytes(int64_t bytes) {
  if (bytes <= batch_bytes_) return absl::OkStatus();
  const int64_t grown = std::max<int64_t>(bytes, 2 * batch_bytes_);
  // Enqueued work may still read the old buffers: wait for it before freeing.
  KVTIER_RETURN_IF_ERROR(gpu::DeviceSynchronize());
  KVTIER_RETURN_IF_ERROR(gpu::PinnedFree(batch_staging_));
  KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(batch_inputs_));
  batch_staging_ = batch_inputs_ = nullptr;
  batch_bytes_ = 0;
  KVTIER_ASSIGN_OR_RETURN(batch_inputs_, gpu::DeviceAlloc(static_cast<size_t>(grown)));
  KVTIER_ASSIGN_OR_RETURN(batch_staging_, gpu::PinnedAlloc(static_cast<size_t>(grown)));
  batch_bytes_ = grown;
  return absl::OkStatus();
}

absl::Status GpuScratch::EnsureBatchWorkspace(int64_t bytes) {
  if (bytes <= batch_workspace_bytes_) return absl::OkStatus();
  KVTIER_RETURN_IF_ERROR(gpu::DeviceSynchronize());
  KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(batch_workspace_));
  batch_workspace_ = nullptr;
  batch_workspace_bytes_ = 0;
  KVTIER_ASSIGN_OR_RETURN(batch_workspace_, gpu::DeviceAlloc(static_cast<size_t>(bytes)));
  batch_workspace_bytes_ = bytes;
  return absl::OkStatus();
}

absl::StatusOr<StepInputs> GpuScratch::UploadPlan(const ForwardPlan& plan,
                                                  const ModelConfig& config,
                                                  gpu::StreamHandle stream) {
  const int64_t t = plan.total, b = plan.batch;
  // [token_slots t (int64)][ids t][positions t][q_indptr b + 1][kv_lens b][block_tables b x m]
  const int64_t ids = 8 * t, positions = 12 * t, indptr = 16 * t, kv_lens = indptr + 4 * (b + 1),
                table = kv_lens + 4 * b, bytes = table + 4 * b * plan.max_blocks;
  const ops::AttentionParams params{.kv = {.layers = 1,
                                           .block_tokens = 1,
                                           .kv_heads = config.num_kv_heads,
                                           .head_dim = config.head_dim},
                                    .q_heads = config.num_heads};
  const int64_t split_rows = std::min(b * plan.max_q_len, kSplitPrefillRows);
  KVTIER_RETURN_IF_ERROR(
      EnsureBatchWorkspace(std::max(ops::gpu::AttentionDecodeWorkspaceBytes(params, b),
                                    ops::gpu::AttentionPrefillWorkspaceBytes(params, split_rows))));
  KVTIER_RETURN_IF_ERROR(batch_staged_.Synchronize());  // the last upload has read the staging
  KVTIER_RETURN_IF_ERROR(EnsureBatchBytes(bytes));
  char* host = static_cast<char*>(batch_staging_);
  std::memcpy(host, plan.token_slots.data(), 8 * t);
  std::memcpy(host + ids, plan.ids.data(), 4 * t);
  std::memcpy(host + positions, plan.positions.data(), 4 * t);
  std::memcpy(host + indptr, plan.q_indptr.data(), 4 * (b + 1));
  std::memcpy(host + kv_lens, plan.kv_lens.data(), 4 * b);
  std::memcpy(host + table, plan.block_tables.data(), 4 * b * plan.max_blocks);
  KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(batch_inputs_, batch_staging_, bytes, stream));
  KVTIER_RETURN_IF_ERROR(batch_staged_.Record(stream));
  const char* base = static_cast<const char*>(batch_inputs_);
  return StepInputs{.n = t,
                    .batch = b,
                    .max_blocks = plan.max_blocks,
                    .token_slots = reinterpret_cast<const int64_t*>(base),
                    .ids = reinterpret_cast<const int32_t*>(base + ids),
                    .positions = reinterpret_cast<const int32_t*>(base + positions),
                    .q_indptr = reinterpret_cast<const int32_t*>(base + indptr),
                    .kv_lens = reinterpret_cast<const int32_t*>(base + kv_lens),
                    .block_tables = reinterpret_cast<const int32_t*>(base + table)};
}

absl::StatusOr<float*> GpuScratch::EnsureLogitsRows(int64_t rows) {
  if (rows <= logits_rows_) return logits_;
  // The old buffer may still be read by enqueued work: wait for it before freeing.
  KVTIER_RETURN_IF_ERROR(gpu::DeviceSynchronize());
  KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(logits_));
  logits_ = nullptr;
  logits_rows_ = 0;
  KVTIER_ASSIGN_OR_RETURN(void* p,
                          gpu::DeviceAlloc(static_cast<size_t>(rows * vocab_) * sizeof(float)));
  logits_ = static_cast<float*>(p);
  logits_rows_ = rows;
  return logits_;
}

}  // namespace kvtier::engine
