// GPU GEMM (kernels/ops/gpu/gemm_gpu.h) against ref::Gemm: the GemmRunner of this build (cuBLASLt
// on CUDA, the tiled kernel on HIP) and the tiled kernel itself (so the CUDA machine also checks
// what the HIP build runs), at Llama-3.1-8B projection shapes, decode (m = 1) to prefill rows, with
// and without bias, 16-bit and float32 outputs.
//
// Tolerance: float32 accumulation in a different order than the reference (~k * 2^-24 relative,
// negligible) and one rounding of y: |got - want| <= 2^-7 |want| (bf16) or 2^-10 |want| (fp16),
// plus atol 1e-3 * max|want| for outputs that are sums cancelling to near zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/ops/gemm.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "tests/kernels/ops_gpu_test_util.h"

namespace kvtier::ops_gpu_test {
namespace {

struct Shape {
  int64_t m, n, k;
  bool bias;
  bool y_float;
};

enum class Which { kRunner, kTiled };

void CheckGemm(DType dtype, Which which, const Shape& sh) {
  std::vector<float> x = Uniform(sh.m * sh.k, -1, 1, 31), w = Uniform(sh.n * sh.k, -1, 1, 32);
  std::vector<float> bias = Uniform(sh.n, -4, 4, 33);
  DeviceBuffer x_dev(Round16(dtype, x)), w_dev(Round16(dtype, w)), b_dev(Round16(dtype, bias));
  DeviceBuffer y_dev(sh.m * sh.n * 4);
  ops::gpu::GemmArgs args{.x = x_dev.get(),
                          .w = w_dev.get(),
                          .bias = sh.bias ? b_dev.get() : nullptr,
                          .m = sh.m,
                          .n = sh.n,
                          .k = sh.k,
                          .y = y_dev.get(),
                          .y_float = sh.y_float};
  if (which == Which::kTiled) {
    KVTIER_ASSERT_OK(ops::gpu::GemmTiled(dtype, args, nullptr));
  } else {
    absl::StatusOr<std::unique_ptr<ops::gpu::GemmRunner>> runner = ops::gpu::GemmRunner::Create();
    KVTIER_ASSERT_OK(runner);
    KVTIER_ASSERT_OK((*runner)->Run(dtype, args, nullptr));
  }
  std::vector<float> want(sh.m * sh.n);
  ops::ref::Gemm(x.data(), w.data(), sh.bias ? bias.data() : nullptr, sh.m, sh.n, sh.k,
                 want.data());
  const std::vector<float> got = sh.y_float ? y_dev.Download<float>(sh.m * sh.n)
                                            : Widen(dtype, y_dev.Download<uint16_t>(sh.m * sh.n));
  float max_abs = 0;
  for (float v : want) max_abs = std::max(max_abs, std::fabs(v));
  const double rtol = sh.y_float ? 1e-5 : (dtype == DType::kBf16 ? 1.0 / 128 : 1.0 / 1024);
  EXPECT_TRUE(Near(got, want, 1e-3 * max_abs, rtol))
      << "m=" << sh.m << " n=" << sh.n << " k=" << sh.k << " bias=" << sh.bias
      << " y_float=" << sh.y_float;
}

class GemmGpu : public ::testing::TestWithParam<std::tuple<DType, Which>> {
 protected:
  void SetUp() override { KVTIER_REQUIRE_GPU(); }
  DType dtype() const { return std::get<0>(GetParam()); }
  Which which() const { return std::get<1>(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(Backends, GemmGpu,
                         ::testing::Combine(::testing::Values(DType::kBf16, DType::kFp16),
                                            ::testing::Values(Which::kRunner, Which::kTiled)),
                         [](const auto& p) {
                           return std::string(ops::gpu::DTypeName(std::get<0>(p.param))) +
                                  (std::get<1>(p.param) == Which::kRunner ? "_runner" : "_tiled");
                         });

// Decode: one row through the fused qkv projection (4096 -> 6144, Qwen2's bias).
TEST_P(GemmGpu, DecodeRowQkvWithBias) { CheckGemm(dtype(), which(), {1, 6144, 4096, true, false}); }

// A prefill chunk through the down projection (14336 -> 4096), rows not a multiple of any tile.
TEST_P(GemmGpu, PrefillRowsDownProjection) {
  CheckGemm(dtype(), which(), {77, 4096, 14336, false, false});
}

// lm_head to float32 logits (a vocabulary not a multiple of the tile).
TEST_P(GemmGpu, LogitsInFloat) { CheckGemm(dtype(), which(), {3, 128264, 512, false, true}); }

TEST_P(GemmGpu, FloatOutputWithBias) { CheckGemm(dtype(), which(), {5, 1000, 64, true, true}); }

TEST(GemmGpuArguments, OddKIsInvalidArgument) {
  KVTIER_REQUIRE_GPU();
  DeviceBuffer buf(1 << 12);
  ops::gpu::GemmArgs args;
  args.x = args.w = buf.get();
  args.y = buf.get();
  args.m = 1;
  args.n = 8;
  args.k = 12;
  const absl::Status s = ops::gpu::GemmTiled(DType::kBf16, args, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("k must be"), std::string::npos) << s;
}

}  // namespace
}  // namespace kvtier::ops_gpu_test
