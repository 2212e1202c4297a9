// GemmRunner over cuBLASLt: the CUDA build's GEMM. CUDA-only by construction (CMake compiles this
// file only in the CUDA variant), so it includes the vendor library's own header: cuBLASLt has no
// HIP twin to map in kernels/gpu_vendor.h.
//
// Row-major y [m, n] = x [m, k] W^T is, read column-major, y^T (n x m) = W' ^T (k x n)^T * x' (k x
// m) where W' and x' are W and x read column-major (leading dimension k): A = W with op T, B = x
// with op N, D = y with leading dimension n. The bias epilogue adds bias[i] to row i of D, that is
// to output feature i. One plan (descriptors and the heuristic's algorithm) per shape, kept.
#include <cublasLt.h>
#include <fmt/format.h>

#include <map>
#include <tuple>

#include "kernels/launch_status.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // NVIDIA's advice for Hopper

absl::Status FromCublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(fmt::format("cuBLASLt {}: {} ({})", what, cublasLtGetStatusName(s),
                                         cublasLtGetStatusString(s)));
}

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

void Destroy(Plan& p) {
  if (p.d != nullptr) cublasLtMatrixLayoutDestroy(p.d);
  if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
  if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
  if (p.op != nullptr) cublasLtMatmulDescDestroy(p.op);
  p = Plan{};
}

class CublasLtRunner final : public GemmRunner {
 public:
  CublasLtRunner(cublasLtHandle_t handle, void* workspace)
      : handle_(handle), workspace_(workspace) {}
  ~CublasLtRunner() override {
    for (auto& [key, plan] : plans_) Destroy(plan);
    (void)::kvtier::gpu::DeviceFree(workspace_);
    cublasLtDestroy(handle_);
  }
  const char* Backend() const override { return "cublaslt"; }

  absl::Status Run(DType dtype, const GemmArgs& args, StreamHandle stream) override {
    KVTIER_RETURN_IF_ERROR(CheckGemmArgs(args));
    KVTIER_ASSIGN_OR_RETURN(Plan * plan, PlanFor(dtype, args));
    const void* bias = args.bias;
    const bool fused_bias = bias != nullptr && !args.y_float;
    if (fused_bias) {
      KVTIER_RETURN_IF_ERROR(
          FromCublas(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof(bias)),
                     "bias pointer"));
    }
    const float alpha = 1.0f;
    const float beta = 0.0f;
    KVTIER_RETURN_IF_ERROR(
        FromCublas(cublasLtMatmul(handle_, plan->op, &alpha, args.w, plan->a, args.x, plan->b,
                                  &beta, args.y, plan->d, args.y, plan->d, &plan->algo, workspace_,
                                  kWorkspaceBytes, static_cast<cudaStream_t>(stream)),
                   "matmul"));
    if (bias == nullptr || fused_bias) return absl::OkStatus();
    return ::kvtier::gpu::StatusFromVendorCode(
        gpu_launch::AddBiasToFloat(dtype == DType::kBf16, static_cast<float*>(args.y),
                                   static_cast<const uint16_t*>(bias), args.m, args.n, stream),
        "Gemm bias launch");
  }

 private:
  using Key = std::tuple<DType, int64_t, int64_t, int64_t, bool, bool>;

  absl::StatusOr<Plan*> PlanFor(DType dtype, const GemmArgs& args) {
    const Key key{dtype, args.m, args.n, args.k, args.bias != nullptr, args.y_float};
    auto it = plans_.find(key);
    if (it != plans_.end()) return &it->second;
    Plan plan;
    const absl::Status made = MakePlan(dtype, args, plan);
    if (!made.ok()) {
      Destroy(plan);
      return made;
    }
    return &plans_.emplace(key, plan).first->second;
  }

  absl::Status MakePlan(DType dtype, const GemmArgs& args, Plan& p) {
    const cudaDataType_t in = dtype == DType::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t out = args.y_float ? CUDA_R_32F : in;
    const auto m = static_cast<uint64_t>(args.m);
    const auto n = static_cast<uint64_t>(args.n);
    const auto k = static_cast<uint64_t>(args.k);
    KVTIER_RETURN_IF_ERROR(
        FromCublas(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc"));
    const cublasOperation_t trans_a = CUBLAS_OP_T;
    const cublasOperation_t trans_b = CUBLAS_OP_N;
    KVTIER_RETURN_IF_ERROR(
        FromCublas(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                  sizeof(trans_a)),
                   "transa"));
    KVTIER_RETURN_IF_ERROR(
        FromCublas(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                  sizeof(trans_b)),
                   "transb"));
    if (args.bias != nullptr && !args.y_float) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      KVTIER_RETURN_IF_ERROR(
          FromCublas(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                    sizeof(epilogue)),
                     "epilogue"));
      KVTIER_RETURN_IF_ERROR(
          FromCublas(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &in,
                                                    sizeof(in)),
                     "bias type"));
    }
    KVTIER_RETURN_IF_ERROR(FromCublas(cublasLtMatrixLayoutCreate(&p.a, in, k, n, k), "layout w"));
    KVTIER_RETURN_IF_ERROR(FromCublas(cublasLtMatrixLayoutCreate(&p.b, in, k, m, k), "layout x"));
    KVTIER_RETURN_IF_ERROR(FromCublas(cublasLtMatrixLayoutCreate(&p.d, out, n, m, n), "layout y"));
    return PickAlgo(p, args);
  }

  absl::Status PickAlgo(Plan& p, const GemmArgs& args) {
    cublasLtMatmulPreference_t pref = nullptr;
    KVTIER_RETURN_IF_ERROR(FromCublas(cublasLtMatmulPreferenceCreate(&pref), "preference"));
    const size_t bytes = kWorkspaceBytes;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.d, p.d, pref, 1, &result,
                                         &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    KVTIER_RETURN_IF_ERROR(FromCublas(s, "heuristic"));
    if (found == 0) {
      return absl::UnimplementedError(
          fmt::format("cuBLASLt has no algorithm for m={} n={} k={} (bias {}, float output {})",
                      args.m, args.n, args.k, args.bias != nullptr, args.y_float));
    }
    p.algo = result.algo;
    return absl::OkStatus();
  }

  cublasLtHandle_t handle_;
  void* workspace_;
  std::map<Key, Plan> plans_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GemmRunner>> GemmRunner::Create() {
  cublasLtHandle_t handle = nullptr;
  KVTIER_RETURN_IF_ERROR(FromCublas(cublasLtCreate(&handle), "create"));
  absl::StatusOr<void*> workspace = ::kvtier::gpu::DeviceAlloc(kWorkspaceBytes);
  if (!workspace.ok()) {
    cublasLtDestroy(handle);
    return workspace.status();
  }
  return std::make_unique<CublasLtRunner>(handle, *workspace);
}

}  // namespace kvtier::ops::gpu
