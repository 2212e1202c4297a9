// CPU-only variant of kvtier_ops_gpu: there is no device; every operator says so.
#include "kernels/ops/gpu/attention_gpu.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "kernels/ops/gpu/ops_gpu.h"

namespace kvtier::ops::gpu {
namespace {

absl::Status NoGpu(const char* op) {
  return absl::FailedPreconditionError(std::string(op) +
                                       ": kvtier was built without a GPU backend");
}

}  // namespace

const char* DTypeName(DType dtype) { return dtype == DType::kBf16 ? "bf16" : "fp16"; }

void SetProgrammaticLaunch(bool) {}

absl::Status Embedding(DType, const int32_t*, int64_t, const void*, int64_t, void*, StreamHandle) {
  return NoGpu("Embedding");
}
absl::Status RmsNorm(DType, const void*, const void*, int64_t, int64_t, float, void*,
                     StreamHandle) {
  return NoGpu("RmsNorm");
}
absl::Status FusedAddRmsNorm(DType, void*, void*, const void*, int64_t, int64_t, float,
                             StreamHandle) {
  return NoGpu("FusedAddRmsNorm");
}
absl::Status ApplyRope(DType, void*, int64_t, const int32_t*, const float*, int64_t, int64_t,
                       int64_t, StreamHandle) {
  return NoGpu("ApplyRope");
}
absl::Status SiluAndMul(DType, const void*, int64_t, int64_t, void*, StreamHandle) {
  return NoGpu("SiluAndMul");
}
absl::Status WriteKv(const void*, const void*, int64_t, const int64_t*, int64_t,
                     const PagedKvGeometry&, int64_t, void*, StreamHandle) {
  return NoGpu("WriteKv");
}
absl::Status Argmax(const float*, int64_t, int64_t, int32_t*, StreamHandle) {
  return NoGpu("Argmax");
}
absl::Status AttentionPrefill(DType, const AttentionParams&, const AttentionBatch&, const int32_t*,
                              int64_t, StreamHandle, const PrefillSplitSpace&) {
  return NoGpu("AttentionPrefill");
}
absl::Status AttentionPrefillPortable(DType, const AttentionParams&, const AttentionBatch&,
                                      const int32_t*, int64_t, StreamHandle,
                                      const PrefillSplitSpace&) {
  return NoGpu("AttentionPrefillPortable");
}
absl::Status AttentionDecode(DType, const AttentionParams&, const AttentionBatch&, int64_t, void*,
                             int64_t, StreamHandle) {
  return NoGpu("AttentionDecode");
}
absl::Status CheckGemmArgs(const GemmArgs&) { return NoGpu("Gemm"); }
absl::Status GemmTiled(DType, const GemmArgs&, StreamHandle) { return NoGpu("GemmTiled"); }
absl::Status Gemv(DType, const GemmArgs&, StreamHandle) { return NoGpu("Gemv"); }
absl::Status GemvSiluMul(DType, const GemmArgs&, StreamHandle) { return NoGpu("GemvSiluMul"); }
absl::Status RopeAndWriteKv(DType, void*, int64_t, int64_t, const void*, const void*, int64_t,
                            const int32_t*, const float*, const int64_t*, int64_t,
                            const PagedKvGeometry&, int64_t, void*, StreamHandle) {
  return NoGpu("RopeAndWriteKv");
}
absl::Status Sample(const float*, int64_t, const SamplingParams&, uint64_t, void*, int64_t,
                    int32_t*, StreamHandle) {
  return NoGpu("Sample");
}
absl::StatusOr<std::unique_ptr<GemmRunner>> GemmRunner::Create() { return NoGpu("Gemm"); }

}  // namespace kvtier::ops::gpu
