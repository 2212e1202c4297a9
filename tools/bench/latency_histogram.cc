#include "tools/bench/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace kvtier::bench {

int LatencyHistogram::BucketOf(uint64_t ns) {
  if (ns < kSub) return static_cast<int>(ns);
  const int exponent = 63 - std::countl_zero(ns);  // >= kSubBits
  const int sub = static_cast<int>((ns >> (exponent - kSubBits)) & (kSub - 1));
  return (exponent - kSubBits + 1) * kSub + sub;
}

uint64_t LatencyHistogram::BucketLow(int bucket) {
  if (bucket < kSub) return static_cast<uint64_t>(bucket);
  const int exponent = bucket / kSub + kSubBits - 1;
  const uint64_t sub = static_cast<uint64_t>(bucket % kSub);
  return (kSub + sub) << (exponent - kSubBits);
}

uint64_t LatencyHistogram::BucketHigh(int bucket) {
  if (bucket < kSub) return static_cast<uint64_t>(bucket);
  const int exponent = bucket / kSub + kSubBits - 1;
  return BucketLow(bucket) + ((uint64_t{1} << (exponent - kSubBits)) - 1);
}

void LatencyHistogram::Record(uint64_t ns) {
  ++counts_[BucketOf(ns)];
  ++count_;
  max_ = std::max(max_, ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int b = 0; b < kBuckets; ++b) counts_[b] += other.counts_[b];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
}

uint64_t LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const double wanted = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_));
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(wanted));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) return std::min(BucketHigh(b), max_);
  }
  return max_;
}

}  // namespace kvtier::bench
