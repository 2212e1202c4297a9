// GPU variant of kernels/ops/gpu/attention_gpu.h: argument checks, the split plans, launches.
#include "kernels/ops/gpu/attention_gpu.h"

#include <algorithm>

#include "kernels/gpu_vendor.h"
#include "kernels/launch_status.h"
#include "kernels/ops/gpu/launch.h"
#include "kernels/ops/gpu/ops_check.h"

namespace kvtier::ops::gpu {
namespace {

namespace check = ::kvtier::ops::gpu_check;
namespace launch = ::kvtier::ops::gpu_launch;

constexpr int64_t kMaxDecodeGroup = 8;    // query heads per KV head the decode kernel holds
constexpr int64_t kMinKeysPerSplit = 64;  // below this a split's fixed cost dominates

absl::Status CheckBatch(const char* op, const AttentionParams& p, const AttentionBatch& b) {
  KVTIER_RETURN_IF_ERROR(check::Positive(op, "batch", b.batch));
  KVTIER_RETURN_IF_ERROR(check::Positive(op, "max_blocks", b.max_blocks));
  const int64_t row = p.q_heads * p.kv.head_dim;
  if (b.q_token_stride != 0 && (b.q_token_stride < row || b.q_token_stride % 2 != 0)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: q_token_stride {} must be 0 or an even number >= q_heads * head_dim = {}",
                    op, b.q_token_stride, row));
  }
  KVTIER_RETURN_IF_ERROR(check::Aligned16(op, "q", b.q));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(op, "pool", b.pool));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(op, "out", b.out));
  KVTIER_RETURN_IF_ERROR(check::NotNull(op, "kv_lens", b.kv_lens));
  KVTIER_RETURN_IF_ERROR(check::NotNull(op, "block_tables", b.block_tables));
  return absl::OkStatus();
}

launch::AttentionArgs ToArgs(const AttentionParams& p, const AttentionBatch& b) {
  launch::AttentionArgs a;
  a.kv = {p.kv.layers, p.kv.block_tokens, p.kv.kv_heads, p.kv.head_dim};
  a.layer = p.layer;
  a.q_heads = p.q_heads;
  a.scale = p.scale;
  a.sliding_window = p.sliding_window;
  a.q = static_cast<const uint16_t*>(b.q);
  a.q_token_stride = b.q_token_stride != 0 ? b.q_token_stride : p.q_heads * p.kv.head_dim;
  a.kv_lens = b.kv_lens;
  a.block_tables = b.block_tables;
  a.max_blocks = b.max_blocks;
  a.batch = b.batch;
  a.pool = static_cast<const uint16_t*>(b.pool);
  a.out = static_cast<uint16_t*>(b.out);
  return a;
}

int Multiprocessors() {
  int device = 0;
  int count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return count;
}

// Query rows a prefill thread block owns: every kernel's tile is 128 rows but the SIMT kernel's.
int64_t PrefillTileRows(bool mma_kernel) { return mma_kernel ? 128 : 32; }

// Sets a.kv_splits and the partial arrays from the plan (attention_gpu.h); no split without a
// workspace or the context's bound.
absl::Status PlanSplit(const char* op, bool allow_mma, const AttentionParams& p,
                       const AttentionBatch& b, int64_t max_q_len, const PrefillSplitSpace& split,
                       launch::AttentionArgs& a) {
  if (split.workspace == nullptr || split.max_kv_len <= 0) return absl::OkStatus();
  KVTIER_RETURN_IF_ERROR(check::Aligned16(op, "workspace", split.workspace));
  const int64_t group = p.q_heads / p.kv.kv_heads;
  const int64_t rows_per_tile = PrefillTileRows(allow_mma);
  const int64_t tiles = (max_q_len * group + rows_per_tile - 1) / rows_per_tile;
  const int64_t span = p.sliding_window > 0
                           ? std::min(split.max_kv_len, p.sliding_window + max_q_len)
                           : split.max_kv_len;
  const int64_t rows = b.batch * max_q_len;  // bounds q_indptr[batch]
  const int64_t per_split = rows * p.q_heads * (p.kv.head_dim + 1) * 4;
  const int64_t splits = PrefillSplits(tiles * p.kv.kv_heads * b.batch, Multiprocessors(), span,
                                       split.workspace_bytes / per_split);
  if (splits == 1) return absl::OkStatus();
  a.kv_splits = static_cast<int>(splits);
  a.partial_out = static_cast<float*>(split.workspace);
  a.partial_lse = a.partial_out + rows * p.q_heads * splits * p.kv.head_dim;
  return absl::OkStatus();
}

absl::Status Prefill(const char* op, bool allow_mma, DType dtype, const AttentionParams& params,
                     const AttentionBatch& batch, const int32_t* q_indptr, int64_t max_q_len,
                     StreamHandle stream, const PrefillSplitSpace& split) {
  KVTIER_RETURN_IF_ERROR(check::AttentionShape(op, params, params.q_heads));
  KVTIER_RETURN_IF_ERROR(CheckBatch(op, params, batch));
  KVTIER_RETURN_IF_ERROR(check::Positive(op, "max_q_len", max_q_len));
  KVTIER_RETURN_IF_ERROR(check::NotNull(op, "q_indptr", q_indptr));
  launch::AttentionArgs args = ToArgs(params, batch);
  KVTIER_RETURN_IF_ERROR(PlanSplit(op, allow_mma, params, batch, max_q_len, split, args));
  const int code =
      launch::AttentionPrefill(dtype == DType::kBf16, args, q_indptr, max_q_len, allow_mma, stream);
  return ::kvtier::gpu::StatusFromVendorCode(code, fmt::format("{} launch", op));
}

}  // namespace

absl::Status AttentionPrefill(DType dtype, const AttentionParams& params,
                              const AttentionBatch& batch, const int32_t* q_indptr,
                              int64_t max_q_len, StreamHandle stream,
                              const PrefillSplitSpace& split) {
  return Prefill("AttentionPrefill", true, dtype, params, batch, q_indptr, max_q_len, stream,
                 split);
}

absl::Status AttentionPrefillPortable(DType dtype, const AttentionParams& params,
                                      const AttentionBatch& batch, const int32_t* q_indptr,
                                      int64_t max_q_len, StreamHandle stream,
                                      const PrefillSplitSpace& split) {
  return Prefill("AttentionPrefillPortable", false, dtype, params, batch, q_indptr, max_q_len,
                 stream, split);
}

absl::Status AttentionDecode(DType dtype, const AttentionParams& params,
                             const AttentionBatch& batch, int64_t max_kv_len, void* workspace,
                             int64_t workspace_bytes, StreamHandle stream) {
  constexpr const char* kOp = "AttentionDecode";
  KVTIER_RETURN_IF_ERROR(check::AttentionShape(kOp, params, kMaxDecodeGroup));
  KVTIER_RETURN_IF_ERROR(CheckBatch(kOp, params, batch));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "max_kv_len", max_kv_len));
  const int64_t need = AttentionDecodeWorkspaceBytes(params, batch.batch);
  if (workspace_bytes < need) {
    return absl::InvalidArgumentError(
        fmt::format("{}: workspace of {} bytes, {} needed", kOp, workspace_bytes, need));
  }
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "workspace", workspace));
  // Enough blocks for four per multiprocessor, no split shorter than kMinKeysPerSplit.
  const int64_t span =
      params.sliding_window > 0 ? std::min(max_kv_len, params.sliding_window) : max_kv_len;
  const int64_t blocks = batch.batch * params.kv.kv_heads;
  int64_t splits = (4 * Multiprocessors() + blocks - 1) / blocks;
  splits = std::clamp<int64_t>(splits, 1, kMaxDecodeSplits);
  splits = std::min(splits, std::max<int64_t>(1, span / kMinKeysPerSplit));
  const int64_t chunk = (span + splits - 1) / splits;
  auto* partial_out = static_cast<float*>(workspace);
  float* partial_lse =
      partial_out + batch.batch * params.q_heads * kMaxDecodeSplits * params.kv.head_dim;
  const int code =
      launch::AttentionDecode(dtype == DType::kBf16, ToArgs(params, batch),
                              static_cast<int>(splits), chunk, partial_out, partial_lse, stream);
  return ::kvtier::gpu::StatusFromVendorCode(code, "AttentionDecode launch");
}

}  // namespace kvtier::ops::gpu
