// GemmTiled, Gemv and the GEMM argument checks (kernels/ops/gpu/gemm_gpu.h), in every GPU variant.
#include "kernels/launch_status.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "kernels/ops/gpu/launch.h"
#include "kernels/ops/gpu/ops_check.h"

namespace kvtier::ops::gpu {

namespace {

// Every GEMM check but the alignment of y's rows.
absl::Status CheckProductArgs(const char* kOp, const GemmArgs& a) {
  namespace check = ::kvtier::ops::gpu_check;
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "m", a.m));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "n", a.n));
  KVTIER_RETURN_IF_ERROR(check::MultipleOf8(kOp, "k", a.k));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "x", a.x));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "w", a.w));
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "y", a.y));
  if (a.bias != nullptr) KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "bias", a.bias));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckGemmArgs(const GemmArgs& a) {
  constexpr const char* kOp = "Gemm";
  KVTIER_RETURN_IF_ERROR(CheckProductArgs(kOp, a));
  if (a.n % 8 != 0) {  // cuBLASLt's 16-byte alignment of y's rows; the tiled kernel needs none
    return absl::InvalidArgumentError(
        fmt::format("{}: n must be a multiple of 8 (16-byte aligned rows of y), got {}", kOp, a.n));
  }
  return absl::OkStatus();
}

absl::Status GemmTiled(DType dtype, const GemmArgs& a, StreamHandle stream) {
  KVTIER_RETURN_IF_ERROR(CheckGemmArgs(a));
  const int code = ::kvtier::ops::gpu_launch::GemmTiled(
      dtype == DType::kBf16, static_cast<const uint16_t*>(a.x), static_cast<const uint16_t*>(a.w),
      static_cast<const uint16_t*>(a.bias), a.m, a.n, a.k, a.y, a.y_float, stream);
  return ::kvtier::gpu::StatusFromVendorCode(code, "GemmTiled launch");
}

namespace {

absl::Status LaunchGemv(const char* op, DType dtype, const GemmArgs& a, bool silu_mul,
                        StreamHandle stream) {
  KVTIER_RETURN_IF_ERROR(CheckProductArgs(op, a));  // any n: y is written element by element
  if (a.m > kGemvMaxRows) {
    return absl::InvalidArgumentError(
        fmt::format("{}: m must be at most {}, got {}", op, kGemvMaxRows, a.m));
  }
  const int code = ::kvtier::ops::gpu_launch::Gemv(
      dtype == DType::kBf16, static_cast<const uint16_t*>(a.x), static_cast<const uint16_t*>(a.w),
      static_cast<const uint16_t*>(a.bias), a.m, a.n, a.k, a.y, a.y_float, silu_mul, stream);
  return ::kvtier::gpu::StatusFromVendorCode(code, fmt::format("{} launch", op));
}

}  // namespace

absl::Status Gemv(DType dtype, const GemmArgs& a, StreamHandle stream) {
  return LaunchGemv("Gemv", dtype, a, false, stream);
}

absl::Status GemvSiluMul(DType dtype, const GemmArgs& a, StreamHandle stream) {
  return LaunchGemv("GemvSiluMul", dtype, a, true, stream);
}

}  // namespace kvtier::ops::gpu
