#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/ops/sampling.h"

namespace kvtier::ops::ref {

int32_t Argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

float Uniform(uint64_t seed, uint64_t counter) {
  uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // 24 bits: exact in a float
}

int32_t Sample(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t step) {
  if (params.temperature <= 0) return Argmax(logits, vocab);
  // Tokens by decreasing logit (the order of probability), ties by id.
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  // NaN (a broken model's output) ranks last: a comparison with NaN is no strict weak order.
  auto key = [&](int32_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b); });
  int64_t keep = params.top_k > 0 ? std::min<int64_t>(params.top_k, vocab) : vocab;
  // Softmax of logits / temperature over the kept tokens, in double.
  std::vector<double> prob(keep);
  const double top = logits[order[0]] / static_cast<double>(params.temperature);
  double sum = 0;
  for (int64_t r = 0; r < keep; ++r) {
    prob[r] = std::exp(logits[order[r]] / static_cast<double>(params.temperature) - top);
    sum += prob[r];
  }
  // top-p: keep rank r while the mass strictly before it is below top_p.
  if (params.top_p < 1) {
    double before = 0;
    int64_t r = 0;
    while (r < keep && (r == 0 || before < params.top_p)) before += prob[r++] / sum;
    keep = r;
  }
  double kept_mass = 0;
  for (int64_t r = 0; r < keep; ++r) kept_mass += prob[r];
  const double target = Uniform(params.seed, step) * kept_mass;
  double cumulative = 0;
  for (int64_t r = 0; r < keep; ++r) {
    cumulative += prob[r];
    if (target < cumulative) return order[r];
  }
  return order[keep - 1];  // rounding: target within an ulp of kept_mass
}

}  // namespace kvtier::ops::ref
