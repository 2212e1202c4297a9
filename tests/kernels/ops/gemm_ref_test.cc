// GEMM reference: y = x W^T + b with W stored [out, in].
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/ops/gemm.h"

namespace kvtier::ops::ref {
namespace {

TEST(GemmRefTest, MultipliesByTheTransposeOfARowMajorWeight) {
  const std::vector<float> x = {1, 2, 3,  // [2, 3]
                                4, 5, 6};
  const std::vector<float> w = {1, 0, 0,  // [2, 3]: output 0 picks x[0], output 1 sums x[1..2]
                                0, 1, 1};
  const std::vector<float> bias = {10, 20};
  std::vector<float> y(4);
  Gemm(x.data(), w.data(), bias.data(), 2, 2, 3, y.data());
  EXPECT_EQ(y, (std::vector<float>{11, 25, 14, 31}));
  Gemm(x.data(), w.data(), nullptr, 2, 2, 3, y.data());
  EXPECT_EQ(y, (std::vector<float>{1, 5, 4, 11}));
}

TEST(GemmRefTest, MatchesADoubleDotProductAtOddSizes) {
  const int64_t m = 7, n = 5, k = 37;  // k not a multiple of the 8 partial sums
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> x(m * k), w(n * k), y(m * n);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  Gemm(x.data(), w.data(), nullptr, m, n, k, y.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t o = 0; o < n; ++o) {
      double want = 0;
      for (int64_t j = 0; j < k; ++j) want += static_cast<double>(x[i * k + j]) * w[o * k + j];
      EXPECT_NEAR(y[i * n + o], want, 1e-5) << i << "," << o;
    }
  }
}

}  // namespace
}  // namespace kvtier::ops::ref
