// The linear layer on the GPU: y = x W^T (+ bias), W as Hugging Face stores it, [out, in] row-major
// (kernels/ops/gemm.h; conventions in ops_gpu.h). Inputs are 16-bit (bf16 or fp16), accumulation
// float32, y either the same 16-bit format or float32 (logits).
//
// GemmRunner is the one entry point the engine uses: cuBLASLt in the CUDA build (the vendor's
// tuned kernels; it owns a handle, a workspace and a per-shape plan cache), our tiled kernel
// (GemmTiled) in the HIP build, where Debian ships no BLAS for ROCm. GemmTiled is callable on every
// GPU build, so the CUDA machine tests the kernel the HIP build runs.
//
// Thread-safety: a GemmRunner is used by one thread at a time (one per stream is the pattern).
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/ops/gpu/ops_gpu.h"

namespace kvtier::ops::gpu {

struct GemmArgs {
  const void* x = nullptr;     // [m, k]
  const void* w = nullptr;     // [n, k]
  const void* bias = nullptr;  // [n] (input dtype) or nullptr
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;         // a multiple of 8
  void* y = nullptr;     // [m, n]; must not alias x or w
  bool y_float = false;  // y in float32 instead of the input dtype
};

class GemmRunner {
 public:
  // On the current device. FailedPrecondition in the CPU-only build.
  static absl::StatusOr<std::unique_ptr<GemmRunner>> Create();
  virtual ~GemmRunner() = default;
  // "cublaslt" or "tiled".
  virtual const char* Backend() const = 0;
  virtual absl::Status Run(DType dtype, const GemmArgs& args, StreamHandle stream) = 0;
};

// Our tiled kernel (kernels/ops/gpu/gemm_tiled_kernel.cu), whatever the vendor.
absl::Status GemmTiled(DType dtype, const GemmArgs& args, StreamHandle stream);

// The linear layer of a decode step, m <= kGemvMaxRows: a kernel of ours (gemv_kernel.cu) that
// streams W once with many 16-byte loads in flight, as a memory-bound product must; cuBLASLt's
// tensor-core tiles are built for many rows. Same contract and checks as GemmRunner::Run, except
// that n may be any size; in every GPU variant (no library, no handle: a graph records it as is).
inline constexpr int64_t kGemvMaxRows = 4;
absl::Status Gemv(DType dtype, const GemmArgs& args, StreamHandle stream);

// Gemv of SiluAndMul(x): args.x is [m, 2k], each row gate | up (what SiluAndMul takes), and the
// product's input row is silu(gate) * up rounded to the format, as SiluAndMul's output is — the
// MLP's down projection of a decode step in one launch, without the activation buffer.
absl::Status GemvSiluMul(DType dtype, const GemmArgs& args, StreamHandle stream);

// Checks shapes, pointers and alignment; shared by both backends.
absl::Status CheckGemmArgs(const GemmArgs& args);

}  // namespace kvtier::ops::gpu
