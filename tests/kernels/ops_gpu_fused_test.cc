// The fused operators of a decode step against the references they fuse: RopeAndWriteKv against
// ref::ApplyRope then ref::WriteKv, GemvSiluMul against ref::SiluAndMul then ref::Gemm, at the
// Llama-3.1-8B shapes, in bf16 and fp16.
//
// Tolerances: RoPE's (ElementwiseTolerance: one rounding of each rotated element); the product's
// as ops_gpu_gemv_test.cc plus the rounding of the activation the reference rounds too (the
// reference's input is SiluAndMul's output rounded to the format, as the GPU rounds it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/rope_config.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "kernels/ops/paged_kv.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/swiglu.h"
#include "tests/kernels/ops_gpu_test_util.h"

namespace kvtier::ops_gpu_test {
namespace {

class FusedGpu : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { KVTIER_REQUIRE_GPU(); }
  DType dtype() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Formats, FusedGpu, ::testing::Values(DType::kBf16, DType::kFp16),
                         [](const auto& p) { return std::string(ops::gpu::DTypeName(p.param)); });

// A fused qkv row per token (`pad` elements after each token's V): q rotated in place, K rotated
// into the pool, V copied there; every other element of the pool and of the row (K, V) unchanged.
void CheckRopeAndWriteKv(DType dtype, const ops::PagedKvGeometry& g, int64_t heads, int64_t pad) {
  constexpr int64_t kN = 37, kSlots = 8, kLayer = 3;
  const int64_t q_dim = heads * g.head_dim, kv_dim = g.token_elems();
  const int64_t stride = q_dim + 2 * kv_dim + pad;
  engine::RopeConfig rope;
  rope.type = engine::RopeConfig::Type::kLlama3;
  rope.theta = 500000;
  rope.factor = 8;
  rope.low_freq_factor = 1;
  rope.high_freq_factor = 4;
  rope.original_max_position = 8192;
  const std::vector<float> inv_freq = engine::RopeInvFreq(rope, g.head_dim);
  std::vector<int32_t> pos(kN);
  for (int64_t i = 0; i < kN; ++i) pos[i] = static_cast<int32_t>(i < 20 ? i : 30000 + 7 * i);
  std::vector<int64_t> slots(kSlots * g.block_tokens);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(5));
  slots.resize(kN);
  std::vector<float> qkv = Uniform(kN * stride, -2, 2, 6);
  std::vector<float> pool = Uniform(kSlots * g.slot_elems(), -1, 1, 7);
  DeviceBuffer qkv_dev(Round16(dtype, qkv)), pool_dev(Round16(dtype, pool));
  DeviceBuffer pos_dev(pos), freq_dev(inv_freq), slots_dev(slots);
  uint16_t* base = qkv_dev.as<uint16_t>();
  KVTIER_ASSERT_OK(ops::gpu::RopeAndWriteKv(dtype, base, stride, heads, base + q_dim,
                                            base + q_dim + kv_dim, stride, pos_dev.as<int32_t>(),
                                            freq_dev.as<float>(), slots_dev.as<int64_t>(), kN, g,
                                            kLayer, pool_dev.get(), nullptr));
  std::vector<float> q(kN * q_dim), k(kN * kv_dim), v(kN * kv_dim);
  for (int64_t i = 0; i < kN; ++i) {
    std::copy_n(qkv.begin() + i * stride, q_dim, q.begin() + i * q_dim);
    std::copy_n(qkv.begin() + i * stride + q_dim, kv_dim, k.begin() + i * kv_dim);
    std::copy_n(qkv.begin() + i * stride + q_dim + kv_dim, kv_dim, v.begin() + i * kv_dim);
  }
  ops::ref::ApplyRope(q.data(), pos.data(), inv_freq.data(), kN, heads, g.head_dim);
  ops::ref::ApplyRope(k.data(), pos.data(), inv_freq.data(), kN, g.kv_heads, g.head_dim);
  Round16(dtype, k);  // the pool holds the rotated K rounded to the format
  ops::ref::WriteKv(k.data(), v.data(), slots.data(), kN, g, kLayer, pool.data());
  const Tolerance tol = ElementwiseTolerance(dtype);
  EXPECT_TRUE(
      Near(Widen(dtype, pool_dev.Download<uint16_t>(pool.size())), pool, tol.atol, tol.rtol));
  const std::vector<float> row = Widen(dtype, qkv_dev.Download<uint16_t>(kN * stride));
  std::vector<float> got_q(q.size());
  for (int64_t i = 0; i < kN; ++i) {
    std::copy_n(row.begin() + i * stride, q_dim, got_q.begin() + i * q_dim);
    for (int64_t j = q_dim; j < stride; ++j) {  // K and V of the row are left as they were
      ASSERT_EQ(row[i * stride + j], qkv[i * stride + j]) << "token " << i << " element " << j;
    }
  }
  EXPECT_TRUE(Near(got_q, q, tol.atol, tol.rtol));
}

// The Llama-3.1-8B shape: every access 16 bytes wide.
TEST_P(FusedGpu, RopeAndWriteKvIsRopeThenWriteKv) {
  CheckRopeAndWriteKv(dtype(), {.layers = 4, .block_tokens = 16, .kv_heads = 8, .head_dim = 128},
                      32, 0);
}

// A head size of 40 (pairs not in runs of 8) and an odd token stride: the element-wise path.
TEST_P(FusedGpu, RopeAndWriteKvUnalignedShapes) {
  CheckRopeAndWriteKv(dtype(), {.layers = 4, .block_tokens = 16, .kv_heads = 2, .head_dim = 40}, 6,
                      0);
  CheckRopeAndWriteKv(dtype(), {.layers = 4, .block_tokens = 16, .kv_heads = 2, .head_dim = 64}, 4,
                      3);
}

void CheckGemvSiluMul(DType dtype, int64_t m, int64_t n, int64_t k) {
  std::vector<float> gate_up = Uniform(m * 2 * k, -3, 3, 21), w = Uniform(n * k, -1, 1, 22);
  DeviceBuffer x_dev(Round16(dtype, gate_up)), w_dev(Round16(dtype, w)), y_dev(m * n * 2);
  const ops::gpu::GemmArgs args{
      .x = x_dev.get(), .w = w_dev.get(), .m = m, .n = n, .k = k, .y = y_dev.get()};
  KVTIER_ASSERT_OK(ops::gpu::GemvSiluMul(dtype, args, nullptr));
  std::vector<float> act(m * k), want(m * n);
  ops::ref::SiluAndMul(gate_up.data(), m, k, act.data());
  Round16(dtype, act);
  ops::ref::Gemm(act.data(), w.data(), nullptr, m, n, k, want.data());
  float max_abs = 0;
  for (float x : want) max_abs = std::max(max_abs, std::fabs(x));
  const double rtol = dtype == DType::kBf16 ? 1.0 / 128 : 1.0 / 1024;
  EXPECT_TRUE(Near(Widen(dtype, y_dev.Download<uint16_t>(m * n)), want, 2e-3 * max_abs, rtol))
      << "m=" << m << " n=" << n << " k=" << k;
}

// The down projection of a decode step (14336 -> 4096), and a few rows of an odd size.
TEST_P(FusedGpu, GemvSiluMulIsSiluAndMulThenGemv) {
  CheckGemvSiluMul(dtype(), 1, 4096, 14336);
  CheckGemvSiluMul(dtype(), 3, 77, 520);
}

}  // namespace
}  // namespace kvtier::ops_gpu_test
