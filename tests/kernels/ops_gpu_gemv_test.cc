// Gemv (kernels/ops/gpu/gemm_gpu.h), the decode step's linear layer, against ref::Gemm at the
// Llama-3.1-8B decode shapes (m = 1), a few rows at once (m <= 4), bias, float32 logits, sizes that
// are not multiples of the kernel's rows per block or columns per pass, and a graph replay.
//
// Tolerance: as the GEMM test (ops_gpu_gemm_test.cc): float32 accumulation in another order and one
// rounding of y: |got - want| <= 1e-3 max|want| + 2^-7 |want| (bf16) or 2^-10 |want| (fp16);
// 1e-5 relative for float32 outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/ops/gemm.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "kernels/ops/gpu/graph.h"
#include "tests/kernels/ops_gpu_test_util.h"

namespace kvtier::ops_gpu_test {
namespace {

struct Shape {
  int64_t m, n, k;
  bool bias;
  bool y_float;
};

void CheckGemv(DType dtype, const Shape& sh, bool in_graph) {
  std::vector<float> x = Uniform(sh.m * sh.k, -1, 1, 41), w = Uniform(sh.n * sh.k, -1, 1, 42);
  std::vector<float> bias = Uniform(sh.n, -4, 4, 43);
  DeviceBuffer x_dev(Round16(dtype, x)), w_dev(Round16(dtype, w)), b_dev(Round16(dtype, bias));
  DeviceBuffer y_dev(sh.m * sh.n * 4);
  const ops::gpu::GemmArgs args{.x = x_dev.get(),
                                .w = w_dev.get(),
                                .bias = sh.bias ? b_dev.get() : nullptr,
                                .m = sh.m,
                                .n = sh.n,
                                .k = sh.k,
                                .y = y_dev.get(),
                                .y_float = sh.y_float};
  if (in_graph) {
    absl::StatusOr<gpu::Stream> stream = gpu::Stream::Create();
    KVTIER_ASSERT_OK(stream);
    absl::StatusOr<ops::gpu::Graph> graph = ops::gpu::Graph::Capture(
        stream->handle(), [&] { return ops::gpu::Gemv(dtype, args, stream->handle()); });
    KVTIER_ASSERT_OK(graph);
    KVTIER_ASSERT_OK(graph->Launch(stream->handle()));
    KVTIER_ASSERT_OK(stream->Synchronize());
  } else {
    KVTIER_ASSERT_OK(ops::gpu::Gemv(dtype, args, nullptr));
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

class GemvGpu : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { KVTIER_REQUIRE_GPU(); }
};

INSTANTIATE_TEST_SUITE_P(Formats, GemvGpu, ::testing::Values(DType::kBf16, DType::kFp16),
                         [](const auto& p) { return std::string(ops::gpu::DTypeName(p.param)); });

// The fused qkv projection with Qwen2's bias (4096 -> 6144).
TEST_P(GemvGpu, QkvWithBias) { CheckGemv(GetParam(), {1, 6144, 4096, true, false}, false); }

// The down projection (14336 -> 4096): long rows, k not a multiple of the 1,024 columns per pass.
TEST_P(GemvGpu, DownProjection) { CheckGemv(GetParam(), {1, 4096, 14336, false, false}, false); }

// lm_head to float32 logits, over a vocabulary that is not a multiple of 16 rows per block (the
// size keeps the CPU reference's product short).
TEST_P(GemvGpu, LogitsInFloat) { CheckGemv(GetParam(), {1, 32003, 4096, false, true}, false); }

// Two to four rows at once (W read once for all), small odd sizes.
TEST_P(GemvGpu, SeveralRows) {
  CheckGemv(GetParam(), {2, 1000, 64, true, false}, false);
  CheckGemv(GetParam(), {3, 24, 8, false, true}, false);
  CheckGemv(GetParam(), {4, 517, 1032, true, true}, false);
}

// Recorded into a graph and replayed: what the engine's decode step does.
TEST_P(GemvGpu, ReplayedFromAGraph) { CheckGemv(GetParam(), {1, 4096, 4096, false, false}, true); }

TEST(GemvGpuArguments, TooManyRowsIsInvalidArgument) {
  KVTIER_REQUIRE_GPU();
  DeviceBuffer buf(1 << 16);
  ops::gpu::GemmArgs args;
  args.x = args.w = buf.get();
  args.y = buf.get();
  args.m = 5;
  args.n = 8;
  args.k = 8;
  const absl::Status s = ops::gpu::Gemv(DType::kBf16, args, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("m must be at most 4"), std::string::npos) << s;
}

}  // namespace
}  // namespace kvtier::ops_gpu_test
