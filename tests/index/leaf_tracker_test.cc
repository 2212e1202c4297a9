// LeafTracker: leafness per tier under adds and removes in any order, and leaf-first eviction built
// from it and a policy.
#include "index/leaf_tracker.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <vector>

#include "index/eviction_policy.h"

namespace kvtier {
namespace {

TEST(LeafTrackerTest, ChainLeafIsDeepestResidentBlock) {
  LeafTracker t;
  t.Add(0, std::nullopt);
  t.Add(1, 0);
  t.Add(2, 1);
  EXPECT_FALSE(t.IsLeaf(0));
  EXPECT_FALSE(t.IsLeaf(1));
  EXPECT_TRUE(t.IsLeaf(2));
  EXPECT_EQ(t.Size(), 3u);
  t.Remove(2);
  EXPECT_TRUE(t.IsLeaf(1));
  EXPECT_FALSE(t.Contains(2));
  t.Remove(1);
  EXPECT_TRUE(t.IsLeaf(0));
  EXPECT_EQ(t.Size(), 1u);
}

TEST(LeafTrackerTest, BranchIsLeafOnlyWhenAllChildrenGone) {
  LeafTracker t;
  t.Add(10, std::nullopt);
  t.Add(11, 10);
  t.Add(12, 10);
  t.Remove(11);
  EXPECT_FALSE(t.IsLeaf(10));
  t.Remove(12);
  EXPECT_TRUE(t.IsLeaf(10));
}

TEST(LeafTrackerTest, ChildBeforeParentAndParentLeavingAndReturning) {
  // A child may be resident in a tier its parent is not in (the parent was demoted, or arrives
  // later): the count is kept on the absent parent and applies when it arrives.
  LeafTracker t;
  t.Add(5, 4);  // 4 not resident here
  EXPECT_FALSE(t.Contains(4));
  t.Add(4, std::nullopt);
  EXPECT_FALSE(t.IsLeaf(4));
  t.Remove(4);  // 5 stays; 4 comes back still not a leaf
  t.Add(4, std::nullopt);
  EXPECT_FALSE(t.IsLeaf(4));
  t.Remove(5);
  EXPECT_TRUE(t.IsLeaf(4));
}

TEST(LeafTrackerTest, UnknownIdIsLeaf) {
  LeafTracker t;
  EXPECT_TRUE(t.IsLeaf(123456));
  EXPECT_FALSE(t.Contains(123456));
}

TEST(LeafTrackerTest, RandomForestMatchesBruteForce) {
  constexpr BlockId kIds = 200;
  std::mt19937 rng(3);
  // A fixed random forest: parent[i] < i, or none.
  std::vector<std::optional<BlockId>> parent(kIds);
  for (BlockId i = 1; i < kIds; ++i) {
    if (rng() % 5 != 0) parent[i] = rng() % i;
  }
  LeafTracker t;
  std::vector<bool> resident(kIds, false);
  for (int op = 0; op < 20000; ++op) {
    BlockId id = rng() % kIds;
    if (resident[id]) {
      t.Remove(id);
    } else {
      t.Add(id, parent[id]);
    }
    resident[id] = !resident[id];
    BlockId probe = rng() % kIds;
    bool leaf = true;
    for (BlockId c = 0; c < kIds; ++c) leaf &= !(resident[c] && parent[c] == probe);
    ASSERT_EQ(t.IsLeaf(probe), leaf) << "op " << op;
    ASSERT_EQ(t.Contains(probe), resident[probe]);
  }
}

TEST(LeafTrackerTest, LeafFirstEvictionTakesChainsFromTheEnd) {
  // Chain 0 <- 1 <- 2 inserted root first, so plain LRU would take the root first. Leaf-first takes
  // 2, 1, 0; a leased leaf is skipped, which shields its ancestors too.
  EvictionConfig config;
  auto lru = MakeEvictionPolicy(config).value();
  LeafTracker t;
  for (BlockId id : {0, 1, 2}) {
    lru->Insert(id, id);
    t.Add(id, id == 0 ? std::nullopt : std::optional<BlockId>(id - 1));
  }
  lru->Insert(7, 7);  // a separate one-block sequence, newest
  t.Add(7, std::nullopt);
  BlockId leased = 2;
  auto leaf_first = [&](BlockId id) { return t.IsLeaf(id) && id != leased; };
  std::optional<BlockId> victim = lru->Evict(leaf_first);
  EXPECT_EQ(victim, 7u);
  t.Remove(7);
  EXPECT_EQ(lru->Evict(leaf_first), std::nullopt);
  leased = 99;
  std::vector<BlockId> order;
  while (auto v = lru->Evict(leaf_first)) {
    t.Remove(*v);
    order.push_back(*v);
  }
  EXPECT_EQ(order, (std::vector<BlockId>{2, 1, 0}));
}

}  // namespace
}  // namespace kvtier
