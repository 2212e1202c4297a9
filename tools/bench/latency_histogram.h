// Latency histogram for `kvtier bench`: log-linear buckets (32 per power of two, so a reported
// percentile is within 1/32 = 3.1% of the true sample above 32 ns, exact below), fixed size so
// that worker processes can send theirs to the parent as plain bytes and merge them there.
//
// Not thread-safe: each worker thread records into its own and the results are merged after.
#pragma once

#include <array>
#include <cstdint>

namespace kvtier::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 5;
  static constexpr int kSub = 1 << kSubBits;
  // Exponents 5..63 get kSub buckets each, after the kSub exact ones for 0..31.
  static constexpr int kBuckets = (64 - kSubBits + 1) * kSub;

  void Record(uint64_t ns);
  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  // The q-quantile (0 < q <= 1) in ns: the highest value of the bucket holding the
  // ceil(q * count)-th smallest sample, capped at max(). 0 when empty.
  uint64_t Quantile(double q) const;

  // Bucket arithmetic, exposed for tests: every value v lands in BucketOf(v), and
  // BucketLow(b) <= v <= BucketHigh(b).
  static int BucketOf(uint64_t ns);
  static uint64_t BucketLow(int bucket);
  static uint64_t BucketHigh(int bucket);

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

}  // namespace kvtier::bench
