// GemmRunner over our tiled kernel: the HIP build's GEMM (Debian's ROCm ships no BLAS).
#include "kernels/ops/gpu/gemm_gpu.h"

namespace kvtier::ops::gpu {
namespace {

class TiledGemmRunner final : public GemmRunner {
 public:
  const char* Backend() const override { return "tiled"; }
  absl::Status Run(DType dtype, const GemmArgs& args, StreamHandle stream) override {
    return GemmTiled(dtype, args, stream);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<GemmRunner>> GemmRunner::Create() {
  return std::make_unique<TiledGemmRunner>();
}

}  // namespace kvtier::ops::gpu
