// GPU variant of kernels/ops/gpu/ops_gpu.h: checks arguments, launches (kernels/ops/gpu/launch.h),
// and turns the vendor's code into a Status.
#include "kernels/ops/gpu/ops_gpu.h"

#include <atomic>

#include "kernels/launch_status.h"
#include "kernels/ops/gpu/launch.h"
#include "kernels/ops/gpu/ops_check.h"

namespace kvtier::ops::gpu_launch {
namespace {
std::atomic<bool> programmatic_launch{true};
}  // namespace
bool ProgrammaticLaunchOn() { return programmatic_launch.load(std::memory_order_relaxed); }
}  // namespace kvtier::ops::gpu_launch

namespace kvtier::ops::gpu {
namespace {

namespace check = ::kvtier::ops::gpu_check;
namespace launch = ::kvtier::ops::gpu_launch;

const uint16_t* U16(const void* p) { return static_cast<const uint16_t*>(p); }
uint16_t* U16(void* p) { return static_cast<uint16_t*>(p); }
bool IsBf16(DType dtype) { return dtype == DType::kBf16; }

absl::Status Launched(int code, const char* op) {
  return ::kvtier::gpu::StatusFromVendorCode(code, fmt::format("{} launch", op));
}

}  // namespace

const char* DTypeName(DType dtype) { return dtype == DType::kBf16 ? "bf16" : "fp16"; }

void SetProgrammaticLaunch(bool on) {
  gpu_launch::programmatic_launch.store(on, std::memory_order_relaxed);
}

absl::Status Embedding(DType dtype, const int32_t* ids, int64_t n, const void* table,
                       int64_t hidden, void* out, StreamHandle stream) {
  constexpr const char* kOp = "Embedding";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "n", n));
  KVTIER_RETURN_IF_ERROR(check::MultipleOf8(kOp, "hidden", hidden));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "ids", ids));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "table", table));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "out", out));
  return Launched(launch::Embedding(IsBf16(dtype), ids, n, U16(table), hidden, U16(out), stream),
                  kOp);
}

absl::Status RmsNorm(DType dtype, const void* x, const void* weight, int64_t rows, int64_t dim,
                     float eps, void* out, StreamHandle stream) {
  constexpr const char* kOp = "RmsNorm";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "rows", rows));
  KVTIER_RETURN_IF_ERROR(check::MultipleOf8(kOp, "dim", dim));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "x", x));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "weight", weight));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "out", out));
  return Launched(launch::RmsNorm(IsBf16(dtype), U16(x), nullptr, U16(weight), rows, dim, eps,
                                  U16(out), stream),
                  kOp);
}

absl::Status FusedAddRmsNorm(DType dtype, void* input, void* residual, const void* weight,
                             int64_t rows, int64_t dim, float eps, StreamHandle stream) {
  constexpr const char* kOp = "FusedAddRmsNorm";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "rows", rows));
  KVTIER_RETURN_IF_ERROR(check::MultipleOf8(kOp, "dim", dim));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "input", input));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "residual", residual));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "weight", weight));
  return Launched(launch::RmsNorm(IsBf16(dtype), U16(input), U16(residual), U16(weight), rows, dim,
                                  eps, U16(input), stream),
                  kOp);
}

absl::Status ApplyRope(DType dtype, void* x, int64_t token_stride, const int32_t* positions,
                       const float* inv_freq, int64_t n, int64_t heads, int64_t head_dim,
                       StreamHandle stream) {
  constexpr const char* kOp = "ApplyRope";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "n", n));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "heads", heads));
  if (head_dim <= 0 || head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: head_dim must be positive and even, got {}", kOp, head_dim));
  }
  if (token_stride < heads * head_dim) {
    return absl::InvalidArgumentError(
        fmt::format("{}: token_stride {} is less than heads * head_dim = {}", kOp, token_stride,
                    heads * head_dim));
  }
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "x", x));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "positions", positions));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "inv_freq", inv_freq));
  return Launched(launch::Rope(IsBf16(dtype), U16(x), token_stride, positions, inv_freq, n, heads,
                               head_dim, stream),
                  kOp);
}

absl::Status SiluAndMul(DType dtype, const void* gate_up, int64_t n, int64_t d, void* out,
                        StreamHandle stream) {
  constexpr const char* kOp = "SiluAndMul";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "n", n));
  KVTIER_RETURN_IF_ERROR(check::MultipleOf8(kOp, "d", d));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "gate_up", gate_up));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "out", out));
  return Launched(launch::SiluAndMul(IsBf16(dtype), U16(gate_up), n, d, U16(out), stream), kOp);
}

absl::Status WriteKv(const void* k, const void* v, int64_t src_token_stride,
                     const int64_t* token_slots, int64_t n, const PagedKvGeometry& geometry,
                     int64_t layer, void* pool, StreamHandle stream) {
  constexpr const char* kOp = "WriteKv";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "n", n));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "block_tokens", geometry.block_tokens));
  KVTIER_RETURN_IF_ERROR(check::MultipleOf8(kOp, "kv_heads * head_dim", geometry.token_elems()));
  KVTIER_RETURN_IF_ERROR(check::MultipleOf8(kOp, "src_token_stride", src_token_stride));
  if (layer < 0 || layer >= geometry.layers) {
    return absl::InvalidArgumentError(
        fmt::format("{}: layer {} outside the pool's {} layers", kOp, layer, geometry.layers));
  }
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "k", k));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "v", v));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "pool", pool));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "token_slots", token_slots));
  const launch::KvGeometry g{geometry.layers, geometry.block_tokens, geometry.kv_heads,
                             geometry.head_dim};
  return Launched(launch::WriteKv(U16(k), U16(v), src_token_stride, token_slots, n, g, layer,
                                  U16(pool), stream),
                  kOp);
}

absl::Status RopeAndWriteKv(DType dtype, void* q, int64_t q_token_stride, int64_t q_heads,
                            const void* k, const void* v, int64_t kv_token_stride,
                            const int32_t* positions, const float* inv_freq,
                            const int64_t* token_slots, int64_t n, const PagedKvGeometry& geometry,
                            int64_t layer, void* pool, StreamHandle stream) {
  constexpr const char* kOp = "RopeAndWriteKv";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "n", n));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "q_heads", q_heads));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "kv_heads", geometry.kv_heads));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "block_tokens", geometry.block_tokens));
  if (geometry.head_dim <= 0 || geometry.head_dim % 2 != 0 || geometry.head_dim > 256) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: head_dim must be positive, even and at most 256, got {}", kOp, geometry.head_dim));
  }
  if (q_token_stride < q_heads * geometry.head_dim || kv_token_stride < geometry.token_elems()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: token strides {} (q) and {} (k, v) are shorter than a token's heads", kOp,
                    q_token_stride, kv_token_stride));
  }
  if (layer < 0 || layer >= geometry.layers) {
    return absl::InvalidArgumentError(
        fmt::format("{}: layer {} outside the pool's {} layers", kOp, layer, geometry.layers));
  }
  const void* pointers[] = {q, k, v, pool, positions, inv_freq, token_slots};
  for (const void* p : pointers) KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "a pointer", p));
  launch::RopeWriteKvArgs a;
  a.q = U16(q);
  a.q_token_stride = q_token_stride;
  a.q_heads = q_heads;
  a.k = U16(k);
  a.v = U16(v);
  a.kv_token_stride = kv_token_stride;
  a.positions = positions;
  a.inv_freq = inv_freq;
  a.token_slots = token_slots;
  a.kv = {geometry.layers, geometry.block_tokens, geometry.kv_heads, geometry.head_dim};
  a.layer = layer;
  a.pool = U16(pool);
  return Launched(launch::RopeWriteKv(IsBf16(dtype), a, n, stream), kOp);
}

absl::Status Argmax(const float* logits, int64_t rows, int64_t vocab, int32_t* out,
                    StreamHandle stream) {
  constexpr const char* kOp = "Argmax";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "rows", rows));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "vocab", vocab));
  if (vocab > INT32_MAX) {
    return absl::InvalidArgumentError(fmt::format("{}: vocab {} exceeds int32", kOp, vocab));
  }
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "logits", logits));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "out", out));
  return Launched(launch::Argmax(logits, rows, vocab, out, stream), kOp);
}

absl::Status Sample(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t step,
                    void* workspace, int64_t workspace_bytes, int32_t* out, StreamHandle stream) {
  constexpr const char* kOp = "Sample";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "vocab", vocab));
  if (vocab > (int64_t{1} << 19)) {
    return absl::InvalidArgumentError(fmt::format("{}: vocab {} exceeds 2^19", kOp, vocab));
  }
  if (!(params.temperature > 0) || params.top_k < 0 || !(params.top_p > 0 && params.top_p <= 1)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: needs temperature > 0 (greedy is Argmax), top_k >= 0 and 0 < top_p <= 1; got {}, "
        "{}, {}",
        kOp, params.temperature, params.top_k, params.top_p));
  }
  if (workspace_bytes < SampleWorkspaceBytes(vocab)) {
    return absl::InvalidArgumentError(fmt::format("{}: workspace of {} bytes, {} needed", kOp,
                                                  workspace_bytes, SampleWorkspaceBytes(vocab)));
  }
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "workspace", workspace));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "logits", logits));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "out", out));
  return Launched(launch::Sample(logits, vocab, params.temperature, params.top_k, params.top_p,
                                 params.seed, step, static_cast<uint64_t*>(workspace), out, stream),
                  kOp);
}

}  // namespace kvtier::ops::gpu
