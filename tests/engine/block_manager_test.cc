// The block manager: slot accounting, prefix hits under the daemon's block keys, sharing by
// reference count, and the LRU life of freed cached blocks.
#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvtier::engine {
namespace {

constexpr int64_t kBt = 4;
const BlockKey kRoot{.lo = 7, .hi = 9};

Sequence Seq(uint64_t id, int64_t n, int32_t first = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return Sequence(id, std::move(t), RequestOptions{});
}

// Admits `seq` with whatever the cache has, computes all but its last token and commits them.
void RunPrefill(BlockManager& bm, Sequence& seq) {
  const int64_t cached = bm.CachedPrefixBlocks(seq);
  ASSERT_TRUE(bm.CanTake(bm.SlotsToAdmit(seq, cached, seq.num_tokens())));
  bm.Admit(seq, cached, seq.num_tokens());
  const int64_t from = seq.num_computed_tokens();
  seq.AddComputedTokens(seq.num_tokens() - from);
  bm.Commit(seq, from);
}

TEST(BlockManagerTest, KeysAreTheDaemonsBlockKeys) {
  Sequence seq = Seq(1, 10);
  std::vector<uint32_t> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 0u);
  const std::vector<BlockKey> keys = TokenBlockKeys(kRoot, tokens, kBt);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(seq.BlockKeyAt(1, kBt, kRoot), keys[1]);
  EXPECT_EQ(seq.BlockKeyAt(0, kBt, kRoot), keys[0]);
}

TEST(BlockManagerTest, AdmitGrowReleaseAccountForSlots) {
  BlockManager bm(8, kBt, kRoot);
  Sequence seq = Seq(1, 9);
  EXPECT_EQ(bm.SlotsToAdmit(seq, 0, 5), 2);
  bm.Admit(seq, 0, 5);
  EXPECT_EQ(seq.block_table().size(), 2u);
  EXPECT_EQ(bm.free_slots(), 6);
  EXPECT_EQ(bm.SlotsToGrow(seq, 8), 0);
  EXPECT_EQ(bm.SlotsToGrow(seq, 9), 1);
  bm.Grow(seq, 9);
  EXPECT_EQ(bm.free_slots(), 5);
  EXPECT_FALSE(bm.CanTake(6));
  bm.Release(seq);
  EXPECT_TRUE(seq.block_table().empty());
  EXPECT_EQ(bm.free_slots(), 8);
  EXPECT_EQ(bm.cached_blocks(), 0);  // nothing was committed
}

TEST(BlockManagerTest, ComputedFullBlocksAreFoundBySharedPrefixes) {
  BlockManager bm(16, kBt, kRoot);
  Sequence a = Seq(1, 14);
  RunPrefill(bm, a);
  EXPECT_EQ(bm.cached_blocks(), 3);  // 14 tokens: 3 full blocks
  Sequence b = Seq(2, 11);           // the same first 11 tokens: 2 full blocks, then 3 tokens
  EXPECT_EQ(bm.CachedPrefixBlocks(b), 2);
  // Both hits are held by `a`: only the third block is new.
  EXPECT_EQ(bm.SlotsToAdmit(b, 2, 11), 1);
  bm.Admit(b, 2, 11);
  EXPECT_EQ(b.num_computed_tokens(), 8);
  EXPECT_EQ(b.cached_tokens(), 8);
  EXPECT_EQ(b.block_table()[0], a.block_table()[0]);
  EXPECT_EQ(b.block_table()[1], a.block_table()[1]);
  EXPECT_NE(b.block_table()[2], a.block_table()[2]);
  Sequence c = Seq(3, 14, 1);  // other tokens: no hit
  EXPECT_EQ(bm.CachedPrefixBlocks(c), 0);
}

TEST(BlockManagerTest, AtLeastOneTokenIsLeftToCompute) {
  BlockManager bm(16, kBt, kRoot);
  Sequence a = Seq(1, 13);
  RunPrefill(bm, a);
  Sequence same = Seq(2, 12);  // three full blocks, all cached: the last one is recomputed
  EXPECT_EQ(bm.CachedPrefixBlocks(same), 2);
}

TEST(BlockManagerTest, ReleasedBlocksStayCachedUntilTheirSlotIsNeeded) {
  BlockManager bm(4, kBt, kRoot);
  Sequence a = Seq(1, 9);  // 3 slots, 2 full blocks committed
  RunPrefill(bm, a);
  bm.Release(a);
  EXPECT_EQ(bm.free_slots(), 4);
  EXPECT_EQ(bm.cached_blocks(), 2);
  // A cached block no one holds costs a free slot when hit.
  Sequence again = Seq(2, 9);
  EXPECT_EQ(bm.CachedPrefixBlocks(again), 2);
  EXPECT_EQ(bm.SlotsToAdmit(again, 2, 9), 3);
  // Other tokens take the never-cached slots first, then evict the least recently released
  // block: a's second block (released before its first).
  Sequence other = Seq(3, 16, 100);
  bm.Admit(other, 0, 8);
  EXPECT_EQ(bm.cached_blocks(), 2);
  bm.Grow(other, 12);
  EXPECT_EQ(bm.cached_blocks(), 1);
  EXPECT_EQ(bm.CachedPrefixBlocks(again), 1);
  bm.Grow(other, 16);
  EXPECT_EQ(bm.cached_blocks(), 0);
  EXPECT_EQ(bm.free_slots(), 0);
}

TEST(BlockManagerTest, ABlockComputedTwiceIsCachedOnce) {
  BlockManager bm(8, kBt, kRoot);
  Sequence a = Seq(1, 6), b = Seq(2, 6);  // admitted together: neither finds the other's block
  bm.Admit(a, 0, 6);
  bm.Admit(b, 0, 6);
  a.AddComputedTokens(6);
  b.AddComputedTokens(6);
  bm.Commit(a, 0);
  bm.Commit(b, 0);
  EXPECT_EQ(bm.cached_blocks(), 1);
  bm.Release(a);
  bm.Release(b);
  EXPECT_EQ(bm.free_slots(), 8);
  Sequence c = Seq(3, 6);
  EXPECT_EQ(bm.CachedPrefixBlocks(c), 1);
}

TEST(BlockManagerTest, PrefixCachingOffFindsNothing) {
  BlockManager bm(8, kBt, kRoot, /*prefix_caching=*/false);
  Sequence a = Seq(1, 9);
  RunPrefill(bm, a);
  EXPECT_EQ(bm.cached_blocks(), 0);
  Sequence b = Seq(2, 9);
  EXPECT_EQ(bm.CachedPrefixBlocks(b), 0);
}

}  // namespace
}  // namespace kvtier::engine
