// Belady's optimum with bypass (index/belady.h): next-use computation, bypass, and the tie-break
// that keeps a parent over its child. The simulator-level differential test against a brute-force
// Belady lives in tests/tools/replay_differential_test.cc.
#include "index/belady.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace kvtier {
namespace {

constexpr uint32_t kNever = BeladyCache::kNever;

TEST(NextUseByRequestTest, PointsAtTheNextRequestThatReferencesTheId) {
  // r0 = {0, 1}, r1 = {2}, r2 = {1, 1, 0}, r3 = {2}
  const std::vector<uint32_t> refs = {0, 1, 2, 1, 1, 0, 2};
  const std::vector<uint64_t> begin = {0, 2, 3, 6, 7};
  EXPECT_EQ(NextUseByRequest(refs, begin, 3),
            (std::vector<uint32_t>{2, 2, 3, kNever, kNever, kNever, kNever}));
}

TEST(NextUseByRequestTest, EmptyTrace) {
  EXPECT_TRUE(NextUseByRequest({}, std::vector<uint64_t>{0}, 0).empty());
}

TEST(BeladyCacheTest, BypassesABlockUsedLaterThanEveryResident) {
  BeladyCache cache(2, 3);
  EXPECT_EQ(cache.Reference(0, 3, 0).outcome, BeladyCache::Outcome::kInserted);
  EXPECT_EQ(cache.Reference(1, 4, 0).outcome, BeladyCache::Outcome::kInserted);
  const auto result = cache.Reference(2, 5, 0);
  EXPECT_EQ(result.outcome, BeladyCache::Outcome::kBypassed);
  EXPECT_FALSE(result.evicted.has_value());
  EXPECT_TRUE(cache.Contains(0));
  EXPECT_TRUE(cache.Contains(1));
  EXPECT_FALSE(cache.Contains(2));
  EXPECT_EQ(cache.Size(), 2u);
}

TEST(BeladyCacheTest, EvictsTheResidentUsedFarthestInTheFuture) {
  BeladyCache cache(2, 3);
  cache.Reference(0, 9, 0);
  cache.Reference(1, 4, 0);
  const auto result = cache.Reference(2, 5, 0);
  EXPECT_EQ(result.outcome, BeladyCache::Outcome::kInserted);
  ASSERT_TRUE(result.evicted.has_value());
  EXPECT_EQ(*result.evicted, 0u);
  EXPECT_TRUE(cache.Contains(2));
}

TEST(BeladyCacheTest, NeverUsedAgainIsFarthest) {
  BeladyCache cache(1, 2);
  cache.Reference(0, kNever, 0);
  const auto result = cache.Reference(1, 7, 0);
  EXPECT_EQ(result.outcome, BeladyCache::Outcome::kInserted);
  EXPECT_EQ(result.evicted, std::optional<BlockId>(0));
}

TEST(BeladyCacheTest, TouchUpdatesThePriority) {
  BeladyCache cache(2, 3);
  cache.Reference(0, 1, 0);
  cache.Reference(1, 5, 0);
  EXPECT_EQ(cache.Reference(0, 8, 0).outcome, BeladyCache::Outcome::kTouched);  // now farthest
  EXPECT_EQ(cache.Reference(2, 6, 0).evicted, std::optional<BlockId>(0));
}

TEST(BeladyCacheTest, AtEqualNextUseTheDeeperBlockLeavesFirst) {
  // A request {parent 0, child 1} inserted last to first into one slot: both are next used by the
  // same request, so the child (depth 1) is evicted and the parent stays.
  BeladyCache cache(1, 2);
  cache.Reference(1, 2, 1);
  const auto result = cache.Reference(0, 2, 0);
  EXPECT_EQ(result.outcome, BeladyCache::Outcome::kInserted);
  EXPECT_EQ(result.evicted, std::optional<BlockId>(1));
  // And a deeper newcomer at equal next use is bypassed rather than displace the parent.
  EXPECT_EQ(cache.Reference(1, 2, 1).outcome, BeladyCache::Outcome::kBypassed);
}

TEST(BeladyCacheTest, StaleHeapEntriesAreCompactedAway) {
  // Many touches of a small resident set must not grow memory without bound or change the answer.
  BeladyCache cache(4, 8);
  for (uint32_t t = 1; t < 100000; ++t) cache.Reference(t % 4, t + 4, 0);
  EXPECT_EQ(cache.Size(), 4u);
  // Resident 0..3 with next uses 99997..100003; id 3 was last touched at t=99999 -> next 100003.
  const auto result = cache.Reference(7, 100001, 0);
  EXPECT_EQ(result.outcome, BeladyCache::Outcome::kInserted);
  EXPECT_EQ(result.evicted, std::optional<BlockId>(3));
}

}  // namespace
}  // namespace kvtier
