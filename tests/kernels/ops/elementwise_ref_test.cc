// Embedding, RMSNorm, RoPE, SwiGLU references on cases small enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/ops/embedding.h"
#include "kernels/ops/rms_norm.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/swiglu.h"

namespace kvtier::ops::ref {
namespace {

TEST(EmbeddingRefTest, CopiesTheRowOfEachId) {
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};  // [3, 2]
  const std::vector<int32_t> ids = {2, 0, 2};
  std::vector<float> out(6);
  Embedding(ids.data(), 3, table.data(), 3, 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1, 20, 21}));
}

TEST(RmsNormRefTest, DividesByRootMeanSquareThenScales) {
  // mean(3^2, 4^2) = 12.5; 3 / sqrt(12.5) = 0.848528, 4 / sqrt(12.5) = 1.131371.
  const std::vector<float> x = {3, 4, -3, -4};  // [2, 2]
  const std::vector<float> w = {1, 2};
  std::vector<float> out(4);
  RmsNorm(x.data(), w.data(), 2, 2, 0.0f, out.data());
  EXPECT_NEAR(out[0], 0.848528f, 1e-6);
  EXPECT_NEAR(out[1], 2 * 1.131371f, 1e-6);
  EXPECT_NEAR(out[2], -0.848528f, 1e-6);
  EXPECT_NEAR(out[3], -2 * 1.131371f, 1e-6);
  // eps is inside the square root: mean(0, 0) + 1 -> x unchanged.
  const std::vector<float> zeros = {0, 0};
  RmsNorm(zeros.data(), w.data(), 1, 2, 1.0f, out.data());
  EXPECT_EQ(out[0], 0.0f);
}

TEST(RmsNormRefTest, FusedAddUpdatesResidualAndNormalizesTheSum) {
  std::vector<float> input = {2, 3};
  std::vector<float> residual = {1, 1};
  const std::vector<float> w = {1, 2};
  FusedAddRmsNorm(input.data(), residual.data(), w.data(), 1, 2, 0.0f);
  EXPECT_EQ(residual, (std::vector<float>{3, 4}));
  EXPECT_NEAR(input[0], 0.848528f, 1e-6);
  EXPECT_NEAR(input[1], 2 * 1.131371f, 1e-6);
}

TEST(RopeRefTest, RotatesHalvesByPositionTimesFrequency) {
  // head_dim 4: pairs (0, 2) and (1, 3); inv_freq {pi/2, 0}: pair 0 turns a quarter per position.
  const std::vector<float> inv_freq = {static_cast<float>(std::numbers::pi / 2), 0.0f};
  std::vector<float> x = {1, 5, 0, 7,   // token 0 (position 0): unchanged
                          1, 5, 0, 7,   // token 1 (position 1): (1, 0) -> (0, 1)
                          1, 5, 0, 7};  // token 2 (position 2): (1, 0) -> (-1, 0)
  const std::vector<int32_t> positions = {0, 1, 2};
  ApplyRope(x.data(), positions.data(), inv_freq.data(), 3, 1, 4);
  const std::vector<float> want = {1, 5, 0, 7, 0, 5, 1, 7, -1, 5, 0, 7};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(x[i], want[i], 1e-6) << i;
}

TEST(RopeRefTest, EveryHeadOfATokenTurnsAlike) {
  const std::vector<float> inv_freq = {0.5f};
  std::vector<float> x = {1, 2, 1, 2};  // [1 token, 2 heads, head_dim 2]
  const int32_t position = 3;
  ApplyRope(x.data(), &position, inv_freq.data(), 1, 2, 2);
  const float c = std::cos(1.5f), s = std::sin(1.5f);
  EXPECT_NEAR(x[0], 1 * c - 2 * s, 1e-6);
  EXPECT_NEAR(x[1], 2 * c + 1 * s, 1e-6);
  EXPECT_EQ(x[0], x[2]);
  EXPECT_EQ(x[1], x[3]);
}

TEST(SiluAndMulRefTest, GatesUpBySiluOfGate) {
  const std::vector<float> gate_up = {0,  1, 3, 2,   // token 0: gate {0, 1}, up {3, 2}
                                      -1, 4, 5, 0};  // token 1: gate {-1, 4}, up {5, 0}
  std::vector<float> out(4);
  SiluAndMul(gate_up.data(), 2, 2, out.data());
  EXPECT_EQ(out[0], 0.0f);                     // silu(0) = 0
  EXPECT_NEAR(out[1], 2 * 0.7310586f, 1e-6);   // silu(1) = 1 / (1 + e^-1)
  EXPECT_NEAR(out[2], 5 * -0.2689414f, 1e-6);  // silu(-1) = -1 / (1 + e)
  EXPECT_EQ(out[3], 0.0f);
}

}  // namespace
}  // namespace kvtier::ops::ref
