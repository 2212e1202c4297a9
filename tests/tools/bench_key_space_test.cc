// Key distributions of `kvtier bench`: zipf ranks follow 1/(r+1)^skew, skew 0 and uniform spread
// evenly, sequential workers partition the key space; keys are distinct, chained and seeded.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "tools/bench/key_space.h"

namespace kvtier::bench {
namespace {

std::vector<uint64_t> Counts(const KeySpace& space, int draws) {
  SequencePicker picker(space, SequencePicker::MakeZipf(space), 0, 1);
  std::vector<uint64_t> counts(space.sequences);
  for (int i = 0; i < draws; ++i) {
    const uint64_t s = picker.Next();
    EXPECT_LT(s, space.sequences);
    ++counts[s];
  }
  return counts;
}

TEST(KeySpaceTest, ZipfRanksFollowThePowerLaw) {
  const KeySpace space{KeyDist::kZipf, 1000, 1.0, 3};
  const std::vector<uint64_t> c = Counts(space, 400000);
  // P(0) / P(r) = (r + 1)^skew: rank 0 twice rank 1, ten times rank 9.
  EXPECT_NEAR(static_cast<double>(c[0]) / c[1], 2.0, 0.1);
  EXPECT_NEAR(static_cast<double>(c[0]) / c[9], 10.0, 0.8);
  // Most draws go to a few hot sequences: the top 10 of 1000 take ~39% (H(10) / H(1000)).
  uint64_t top = 0;
  for (int r = 0; r < 10; ++r) top += c[r];
  EXPECT_NEAR(top / 400000.0, 2.929 / 7.485, 0.02);
}

TEST(KeySpaceTest, ZipfWithSkewZeroAndUniformSpreadEvenly) {
  for (KeyDist dist : {KeyDist::kZipf, KeyDist::kUniform}) {
    const KeySpace space{dist, 10, 0.0, 5};
    for (uint64_t n : Counts(space, 100000)) EXPECT_NEAR(n / 100000.0, 0.1, 0.01);
  }
}

TEST(KeySpaceTest, SequentialWorkersPartitionTheKeySpaceInOrder) {
  const KeySpace space{KeyDist::kSequential, 12, 0, 1};
  std::multiset<uint64_t> seen;
  for (uint32_t w = 0; w < 3; ++w) {
    SequencePicker picker(space, nullptr, w, 3);
    for (uint64_t i = 0; i < 4; ++i) {
      const uint64_t s = picker.Next();
      EXPECT_EQ(s, w + 3 * i);
      seen.insert(s);
    }
    EXPECT_EQ(picker.Next(), w);  // wraps at the end of the key space
  }
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), 12u);
}

TEST(KeySpaceTest, KeysAreDistinctAcrossSequencesAndBlocksAndDependOnTheSeed) {
  absl::flat_hash_set<BlockKey> keys;
  std::vector<BlockKey> chain;
  for (uint64_t s = 0; s < 1000; ++s) {
    ChainKeys(42, s, 64, &chain);
    ASSERT_EQ(chain.size(), 64u);
    EXPECT_EQ(chain[5], BenchKey(42, s, 5));
    keys.insert(chain.begin(), chain.end());
  }
  EXPECT_EQ(keys.size(), 64000u);
  EXPECT_NE(BenchKey(1, 7, 0), BenchKey(2, 7, 0));
}

TEST(KeySpaceTest, DistributionNamesRoundTrip) {
  for (KeyDist d : {KeyDist::kUniform, KeyDist::kZipf, KeyDist::kSequential}) {
    EXPECT_EQ(*ParseKeyDist(KeyDistName(d)), d);
  }
  EXPECT_FALSE(ParseKeyDist("pareto").ok());
}

}  // namespace
}  // namespace kvtier::bench
