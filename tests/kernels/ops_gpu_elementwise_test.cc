// The GPU row-wise operators (kernels/ops/gpu/ops_gpu.h) against their CPU fp32 references at
// Llama-3.1-8B shapes, in bf16 and fp16. Tolerances: ops_gpu_test_util.h (ElementwiseTolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "engine/rope_config.h"
#include "kernels/ops/embedding.h"
#include "kernels/ops/paged_kv.h"
#include "kernels/ops/rms_norm.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/sampling.h"
#include "kernels/ops/swiglu.h"
#include "tests/kernels/ops_gpu_test_util.h"

namespace kvtier::ops_gpu_test {
namespace {

class OpsGpu : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { KVTIER_REQUIRE_GPU(); }
  DType dtype() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Formats, OpsGpu, ::testing::Values(DType::kBf16, DType::kFp16),
                         [](const auto& p) { return ops::gpu::DTypeName(p.param); });

TEST_P(OpsGpu, EmbeddingCopiesRowsExactly) {
  constexpr int64_t kVocab = 1000, kHidden = 4096, kN = 67;
  std::vector<float> table = Uniform(kVocab * kHidden, -1, 1, 1);
  DeviceBuffer table_dev(Round16(dtype(), table));
  std::vector<int32_t> ids(kN);
  for (int64_t i = 0; i < kN; ++i) ids[i] = static_cast<int32_t>((i * 7919) % kVocab);
  ids[5] = kVocab - 1;
  DeviceBuffer ids_dev(ids), out_dev(kN * kHidden * 2);
  KVTIER_ASSERT_OK(ops::gpu::Embedding(dtype(), ids_dev.as<int32_t>(), kN, table_dev.get(), kHidden,
                                       out_dev.get(), nullptr));
  std::vector<float> want(kN * kHidden);
  ops::ref::Embedding(ids.data(), kN, table.data(), kVocab, kHidden, want.data());
  EXPECT_TRUE(Near(Widen(dtype(), out_dev.Download<uint16_t>(kN * kHidden)), want, 0, 0));
}

TEST_P(OpsGpu, RmsNormMatchesReference) {
  constexpr int64_t kRows = 33, kDim = 4096;
  std::vector<float> x = Uniform(kRows * kDim, -3, 3, 2), w = Uniform(kDim, 0.5, 1.5, 3);
  DeviceBuffer x_dev(Round16(dtype(), x)), w_dev(Round16(dtype(), w)), out_dev(kRows * kDim * 2);
  KVTIER_ASSERT_OK(ops::gpu::RmsNorm(dtype(), x_dev.get(), w_dev.get(), kRows, kDim, 1e-5f,
                                     out_dev.get(), nullptr));
  std::vector<float> want(kRows * kDim);
  ops::ref::RmsNorm(x.data(), w.data(), kRows, kDim, 1e-5f, want.data());
  const Tolerance tol = ElementwiseTolerance(dtype());
  EXPECT_TRUE(
      Near(Widen(dtype(), out_dev.Download<uint16_t>(kRows * kDim)), want, tol.atol, tol.rtol));
}

// Qwen3's q/k norm: rows of head_dim 128.
TEST_P(OpsGpu, RmsNormPerHead) {
  constexpr int64_t kRows = 5 * 32, kDim = 128;
  std::vector<float> x = Uniform(kRows * kDim, -3, 3, 4), w = Uniform(kDim, 0.5, 1.5, 5);
  DeviceBuffer x_dev(Round16(dtype(), x)), w_dev(Round16(dtype(), w));
  KVTIER_ASSERT_OK(ops::gpu::RmsNorm(dtype(), x_dev.get(), w_dev.get(), kRows, kDim, 1e-6f,
                                     x_dev.get(), nullptr));  // in place
  std::vector<float> want(kRows * kDim);
  ops::ref::RmsNorm(x.data(), w.data(), kRows, kDim, 1e-6f, want.data());
  const Tolerance tol = ElementwiseTolerance(dtype());
  EXPECT_TRUE(
      Near(Widen(dtype(), x_dev.Download<uint16_t>(kRows * kDim)), want, tol.atol, tol.rtol));
}

TEST_P(OpsGpu, FusedAddRmsNormUpdatesResidualAndNormalizes) {
  constexpr int64_t kRows = 17, kDim = 4096;
  std::vector<float> in = Uniform(kRows * kDim, -1, 1, 6), res = Uniform(kRows * kDim, -4, 4, 7);
  std::vector<float> w = Uniform(kDim, 0.5, 1.5, 8);
  DeviceBuffer in_dev(Round16(dtype(), in)), res_dev(Round16(dtype(), res));
  DeviceBuffer w_dev(Round16(dtype(), w));
  KVTIER_ASSERT_OK(ops::gpu::FusedAddRmsNorm(dtype(), in_dev.get(), res_dev.get(), w_dev.get(),
                                             kRows, kDim, 1e-5f, nullptr));
  ops::ref::FusedAddRmsNorm(in.data(), res.data(), w.data(), kRows, kDim, 1e-5f);
  const Tolerance tol = ElementwiseTolerance(dtype());
  EXPECT_TRUE(
      Near(Widen(dtype(), res_dev.Download<uint16_t>(kRows * kDim)), res, tol.atol, tol.rtol / 2))
      << "residual: one rounding of the sum";
  EXPECT_TRUE(
      Near(Widen(dtype(), in_dev.Download<uint16_t>(kRows * kDim)), in, tol.atol, tol.rtol));
}

// Positions up to 32K (angles of thousands of radians) with Llama 3.1's llama3-scaled frequencies,
// on q rotated where it lies in a fused qkv row (token_stride > heads * head_dim).
TEST_P(OpsGpu, RopeLlama3MatchesReference) {
  constexpr int64_t kN = 300, kHeads = 32, kKvHeads = 8, kDim = 128;
  constexpr int64_t kStride = (kHeads + 2 * kKvHeads) * kDim;
  engine::RopeConfig rope;
  rope.type = engine::RopeConfig::Type::kLlama3;
  rope.theta = 500000;
  rope.factor = 8;
  rope.low_freq_factor = 1;
  rope.high_freq_factor = 4;
  rope.original_max_position = 8192;
  const std::vector<float> inv_freq = engine::RopeInvFreq(rope, kDim);
  std::vector<int32_t> pos(kN);
  for (int64_t i = 0; i < kN; ++i) pos[i] = static_cast<int32_t>(i < 100 ? i : 32000 + i);
  std::vector<float> qkv = Uniform(kN * kStride, -2, 2, 9);
  DeviceBuffer qkv_dev(Round16(dtype(), qkv)), pos_dev(pos), freq_dev(inv_freq);
  KVTIER_ASSERT_OK(ops::gpu::ApplyRope(dtype(), qkv_dev.get(), kStride, pos_dev.as<int32_t>(),
                                       freq_dev.as<float>(), kN, kHeads, kDim, nullptr));
  std::vector<float> q(kN * kHeads * kDim);
  for (int64_t i = 0; i < kN; ++i) {
    std::copy_n(qkv.begin() + i * kStride, kHeads * kDim, q.begin() + i * kHeads * kDim);
  }
  ops::ref::ApplyRope(q.data(), pos.data(), inv_freq.data(), kN, kHeads, kDim);
  const std::vector<float> all = Widen(dtype(), qkv_dev.Download<uint16_t>(kN * kStride));
  std::vector<float> got(q.size());
  for (int64_t i = 0; i < kN; ++i) {
    std::copy_n(all.begin() + i * kStride, kHeads * kDim, got.begin() + i * kHeads * kDim);
    // K and V of the row are untouched.
    for (int64_t j = kHeads * kDim; j < kStride; ++j)
      ASSERT_EQ(all[i * kStride + j], qkv[i * kStride + j]);
  }
  const Tolerance tol = ElementwiseTolerance(dtype());
  EXPECT_TRUE(Near(got, q, tol.atol, tol.rtol));
}

TEST_P(OpsGpu, SiluAndMulMatchesReference) {
  constexpr int64_t kN = 19, kD = 14336;
  std::vector<float> gu = Uniform(kN * 2 * kD, -6, 6, 10);
  DeviceBuffer gu_dev(Round16(dtype(), gu)), out_dev(kN * kD * 2);
  KVTIER_ASSERT_OK(ops::gpu::SiluAndMul(dtype(), gu_dev.get(), kN, kD, out_dev.get(), nullptr));
  std::vector<float> want(kN * kD);
  ops::ref::SiluAndMul(gu.data(), kN, kD, want.data());
  const Tolerance tol = ElementwiseTolerance(dtype());
  EXPECT_TRUE(
      Near(Widen(dtype(), out_dev.Download<uint16_t>(kN * kD)), want, tol.atol, tol.rtol / 2));
}

// K and V land in the block-major payload slots exactly where ref::WriteKv puts them; the rest of
// the pool is untouched.
TEST_P(OpsGpu, WriteKvFillsBlockMajorSlots) {
  const ops::PagedKvGeometry g{.layers = 4, .block_tokens = 16, .kv_heads = 8, .head_dim = 128};
  constexpr int64_t kSlots = 10, kN = 50, kLayer = 2;
  const int64_t row = g.token_elems(), stride = 48 * 128;  // K and V inside a qkv row
  std::vector<float> pool = Uniform(kSlots * g.slot_elems(), -1, 1, 11);
  std::vector<float> qkv = Uniform(kN * stride, -1, 1, 12);
  std::vector<int64_t> token_slots(kSlots * g.block_tokens);
  std::iota(token_slots.begin(), token_slots.end(), 0);
  std::shuffle(token_slots.begin(), token_slots.end(), std::mt19937(13));
  token_slots.resize(kN);
  DeviceBuffer pool_dev(Round16(dtype(), pool)), qkv_dev(Round16(dtype(), qkv));
  DeviceBuffer slots_dev(token_slots);
  const uint16_t* k_dev = qkv_dev.as<uint16_t>() + 32 * 128;
  const uint16_t* v_dev = k_dev + row;
  KVTIER_ASSERT_OK(ops::gpu::WriteKv(k_dev, v_dev, stride, slots_dev.as<int64_t>(), kN, g, kLayer,
                                     pool_dev.get(), nullptr));
  std::vector<float> k(kN * row), v(kN * row);
  for (int64_t i = 0; i < kN; ++i) {
    std::copy_n(qkv.begin() + i * stride + 32 * 128, row, k.begin() + i * row);
    std::copy_n(qkv.begin() + i * stride + 32 * 128 + row, row, v.begin() + i * row);
  }
  ops::ref::WriteKv(k.data(), v.data(), token_slots.data(), kN, g, kLayer, pool.data());
  EXPECT_TRUE(Near(Widen(dtype(), pool_dev.Download<uint16_t>(pool.size())), pool, 0, 0));
}

TEST(OpsGpuArgmax, LargestLogitLowestIndexOnTies) {
  KVTIER_REQUIRE_GPU();
  constexpr int64_t kRows = 3, kVocab = 151936;
  std::vector<float> logits = Uniform(kRows * kVocab, -20, 20, 14);
  logits[0 * kVocab + 100] = 50;
  logits[0 * kVocab + 90000] = 50;  // a tie: the lower index wins
  logits[1 * kVocab + kVocab - 1] = 60;
  logits[2 * kVocab + 0] = 21;
  DeviceBuffer logits_dev(logits), out_dev(kRows * 4);
  KVTIER_ASSERT_OK(
      ops::gpu::Argmax(logits_dev.as<float>(), kRows, kVocab, out_dev.as<int32_t>(), nullptr));
  const std::vector<int32_t> got = out_dev.Download<int32_t>(kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(got[r], ops::ref::Argmax(logits.data() + r * kVocab, kVocab)) << "row " << r;
  }
  EXPECT_EQ(got[0], 100);
}

// Arguments the kernels cannot serve are refused with the operator and the value named.
TEST(OpsGpuArguments, MisalignedOrUnsupportedShapesAreInvalidArgument) {
  KVTIER_REQUIRE_GPU();
  DeviceBuffer buf(4096);
  absl::Status s =
      ops::gpu::RmsNorm(DType::kBf16, buf.get(), buf.get(), 1, 12, 1e-5f, buf.get(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("RmsNorm: dim"), std::string::npos) << s;
  s = ops::gpu::SiluAndMul(DType::kBf16, buf.as<uint16_t>() + 1, 1, 8, buf.get(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("gate_up"), std::string::npos) << s;
}

}  // namespace
}  // namespace kvtier::ops_gpu_test
