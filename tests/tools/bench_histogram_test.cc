// LatencyHistogram: every value lands in a bucket that contains it, buckets are within 1/32 of
// their values, quantiles follow the ceil(q * n)-th sample, and merging equals recording all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tools/bench/latency_histogram.h"

namespace kvtier::bench {
namespace {

TEST(LatencyHistogramTest, EveryValueLandsInABucketThatHoldsIt) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);
    const int b = LatencyHistogram::BucketOf(v);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, LatencyHistogram::kBuckets);
    ASSERT_LE(LatencyHistogram::BucketLow(b), v);
    ASSERT_GE(LatencyHistogram::BucketHigh(b), v);
    // Resolution: a bucket's width is at most 1/32 of its lowest value.
    ASSERT_LE(LatencyHistogram::BucketHigh(b) - LatencyHistogram::BucketLow(b),
              LatencyHistogram::BucketLow(b) / 32);
  }
  EXPECT_EQ(LatencyHistogram::BucketOf(UINT64_MAX), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 20; ++v) h.Record(v);
  EXPECT_EQ(h.Quantile(0.5), 10u);  // the 10th of 20
  EXPECT_EQ(h.Quantile(0.9), 18u);
  EXPECT_EQ(h.Quantile(1.0), 20u);
  EXPECT_EQ(h.Quantile(0.01), 1u);
  EXPECT_EQ(h.count(), 20u);
  EXPECT_EQ(h.max(), 20u);
}

TEST(LatencyHistogramTest, QuantilesAreWithinOneBucketOfTheSortedSample) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> dist(8.0, 1.5);  // ~3 us median, long tail
  std::vector<uint64_t> values;
  LatencyHistogram h;
  for (int i = 0; i < 200000; ++i) {
    values.push_back(static_cast<uint64_t>(dist(rng)));
    h.Record(values.back());
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const uint64_t exact = values[static_cast<size_t>(std::ceil(q * values.size())) - 1];
    const uint64_t got = h.Quantile(q);
    EXPECT_GE(got, exact) << q;  // the top of the bucket holding it
    EXPECT_LE(got, exact + exact / 32 + 1) << q;
  }
  EXPECT_EQ(h.Quantile(1.0), values.back());
}

TEST(LatencyHistogramTest, EmptyHistogramReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.Quantile(0.5), 0u);
  EXPECT_EQ(h.Quantile(0.999), 0u);
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverySampleInOne) {
  LatencyHistogram a, b, all;
  for (uint64_t v = 0; v < 5000; ++v) {
    const uint64_t x = v * v % 100003;
    (v % 3 ? a : b).Record(x);
    all.Record(x);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.max(), all.max());
  for (double q : {0.1, 0.5, 0.9, 0.99, 0.999}) EXPECT_EQ(a.Quantile(q), all.Quantile(q));
}

}  // namespace
}  // namespace kvtier::bench
