// Random numbers for the workload generator that are the same on every platform: std::mt19937_64's
// raw output is fixed by the C++ standard, but std::*_distribution algorithms are not, so the
// distributions here are our own. (They use log and pow from libm, which agree across glibc
// versions and platforms to the last bit in all but rare cases; the draws are then rounded to whole
// tokens.)
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace kvtier::synth {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  uint64_t Bits() { return engine_(); }
  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0 (multiply-shift; the bias is below 2^-64 * n).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(engine_()) * n) >> 64);
  }
  // Exponential with the given mean.
  double Exponential(double mean) { return -mean * std::log1p(-Uniform()); }
  // Log-uniform in [lo, hi]: as likely to fall in [100, 200] as in [1000, 2000].
  double LogUniform(double lo, double hi) { return lo * std::exp(Uniform() * std::log(hi / lo)); }
  // True with probability p.
  bool Chance(double p) { return Uniform() < p; }

 private:
  std::mt19937_64 engine_;
};

// Ranks 0..n-1 with P(k) proportional to 1 / (k + 1)^alpha (alpha 0 is uniform), by inverting a
// precomputed cumulative table: O(log n) per draw.
class ZipfSampler {
 public:
  ZipfSampler(size_t n, double alpha) : cdf_(n) {
    double sum = 0;
    for (size_t k = 0; k < n; ++k) cdf_[k] = sum += std::pow(static_cast<double>(k + 1), -alpha);
    for (double& c : cdf_) c /= sum;
  }

  size_t Sample(Rng& rng) const {
    double u = rng.Uniform();
    size_t lo = 0, hi = cdf_.size() - 1;  // the first k with u < cdf_[k]
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (u < cdf_[mid]) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }

  size_t size() const { return cdf_.size(); }

 private:
  std::vector<double> cdf_;
};

}  // namespace kvtier::synth
