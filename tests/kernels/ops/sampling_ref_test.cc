// Sampling reference: greedy, temperature, top-k, top-p, and the seeded counter-based draw.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops/sampling.h"

namespace kvtier::ops::ref {
namespace {

TEST(SamplingRefTest, ArgmaxTakesTheFirstOfEqualMaxima) {
  const std::vector<float> logits = {1, 5, 2, 5};
  EXPECT_EQ(Argmax(logits.data(), 4), 1);
}

TEST(SamplingRefTest, UniformIsDeterministicAndInRange) {
  EXPECT_EQ(Uniform(42, 7), Uniform(42, 7));
  EXPECT_NE(Uniform(42, 7), Uniform(42, 8));
  EXPECT_NE(Uniform(42, 7), Uniform(43, 7));
  double sum = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const float u = Uniform(1, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);  // 5 standard deviations
}

// Fraction of 4000 steps that draw each token.
std::vector<double> Frequencies(const std::vector<float>& logits, const SamplingParams& params) {
  std::vector<int> count(logits.size(), 0);
  for (uint64_t step = 0; step < 4000; ++step) {
    ++count[Sample(logits.data(), static_cast<int64_t>(logits.size()), params, step)];
  }
  std::vector<double> freq;
  for (int c : count) freq.push_back(c / 4000.0);
  return freq;
}

TEST(SamplingRefTest, TemperatureSamplesTheSoftmax) {
  const std::vector<float> logits = {0, std::log(3.0f)};  // probabilities 1/4, 3/4
  std::vector<double> freq = Frequencies(logits, {.temperature = 1, .seed = 9});
  EXPECT_NEAR(freq[1], 0.75, 0.03);
  // Temperature 2 flattens: probabilities 1 : sqrt(3) -> 0.634 for token 1.
  freq = Frequencies(logits, {.temperature = 2, .seed = 9});
  EXPECT_NEAR(freq[1], std::sqrt(3.0) / (1 + std::sqrt(3.0)), 0.03);
}

TEST(SamplingRefTest, ZeroTemperatureIsGreedy) {
  const std::vector<float> logits = {0, 3, 1};
  EXPECT_EQ(Frequencies(logits, {.temperature = 0})[1], 1.0);
}

TEST(SamplingRefTest, TopKKeepsTheKMostLikely) {
  const std::vector<float> logits = {2, 0, 2.5f, 1};
  const std::vector<double> freq = Frequencies(logits, {.temperature = 1, .top_k = 2, .seed = 3});
  EXPECT_EQ(freq[1], 0.0);
  EXPECT_EQ(freq[3], 0.0);
  EXPECT_NEAR(freq[2], 1 / (1 + std::exp(-0.5)), 0.03);
}

TEST(SamplingRefTest, TopPKeepsTokensUntilTheirMassReachesP) {
  // Probabilities 0.5, 0.3, 0.2: top_p 0.7 keeps the first two (0.5 < 0.7, then 0.8 >= 0.7).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  std::vector<double> freq = Frequencies(logits, {.temperature = 1, .top_p = 0.7f, .seed = 5});
  EXPECT_EQ(freq[2], 0.0);
  EXPECT_NEAR(freq[0], 0.5 / 0.8, 0.03);
  // A top_p below the first token's mass still keeps that token.
  freq = Frequencies(logits, {.temperature = 1, .top_p = 0.1f, .seed = 5});
  EXPECT_EQ(freq[0], 1.0);
}

TEST(SamplingRefTest, NanLogitsAreNeverSampled) {
  std::vector<float> logits(64);
  for (int i = 0; i < 64; ++i) logits[i] = i % 3 == 0 ? NAN : std::cos(i * 0.37f);
  const SamplingParams params{.temperature = 1, .top_k = 40, .top_p = 0.95f, .seed = 1};
  for (uint64_t step = 0; step < 200; ++step) {
    const int32_t token = Sample(logits.data(), 64, params, step);
    ASSERT_GE(token, 0);
    ASSERT_LT(token, 64);
    ASSERT_FALSE(std::isnan(logits[token])) << token;
  }
}

TEST(SamplingRefTest, SameSeedAndStepSameToken) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 1.7f);
  const SamplingParams params{.temperature = 0.8f, .top_k = 50, .top_p = 0.9f, .seed = 77};
  for (uint64_t step = 0; step < 20; ++step) {
    EXPECT_EQ(Sample(logits.data(), 100, params, step), Sample(logits.data(), 100, params, step));
  }
}

}  // namespace
}  // namespace kvtier::ops::ref
