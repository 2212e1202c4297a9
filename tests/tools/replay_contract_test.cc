// The replay contract (issue 2): block and prefix hits, last-to-first insertion, LRU and Belady
// with bypass -- on hand-checked tiny traces and on the bundled Mooncake trace's sanity values.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/tools/replay_test_util.h"
#include "tools/replay/simulator.h"
#include "tools/replay/trace_reader.h"

namespace kvtier::replay {
namespace {

using testing::MakeTrace;

SimResult RunPolicy(const Trace& trace, const std::string& policy, uint64_t capacity) {
  TierConfig tier;
  tier.capacity_blocks = capacity;
  tier.eviction.policy = policy;
  absl::StatusOr<SimResult> result = Simulate(trace, {tier}, SimOptions{});
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SimResult{};
}

TEST(ReplayContractTest, LruHandChecked) {
  // Capacity 3. Requests (ids): {1,2,3} {1,2,4} {1,5} {1,2,3}
  //  r0: no hits; insert 3,2,1 -> MRU order 1 2 3.
  //  r1: 1 and 2 present (prefix 2), 4 absent; insert 4 (evicts 3), touch 2, 1 -> 1 2 4.
  //  r2: 1 present (prefix 1); insert 5 (evicts 4), touch 1 -> 1 5 2.
  //  r3: 1, 2 present (prefix 2), 3 absent -> block hits 2, prefix hits 2. Inserting 3 evicts 2,
  //      so the touch of 2 that follows re-inserts it and evicts 5.
  const Trace trace = MakeTrace({{1, 2, 3}, {1, 2, 4}, {1, 5}, {1, 2, 3}});
  const SimResult r = RunPolicy(trace, "lru", 3);
  EXPECT_EQ(r.requests, 4u);
  EXPECT_EQ(r.block_refs, 11u);
  EXPECT_EQ(r.unique_blocks, 5u);
  EXPECT_EQ(r.block_hits, 5u);
  EXPECT_EQ(r.prefix_hits, 5u);
  EXPECT_EQ(r.counters[0].evictions, 4u);  // 3, 4, 2, 5
}

TEST(ReplayContractTest, BlockHitsCountPresentIdsAfterAMiss) {
  // Capacity 4. r0 {1,2,3}; r1 {1,9,3}: 1 and 3 present, but the prefix stops at 9.
  const SimResult r = RunPolicy(MakeTrace({{1, 2, 3}, {1, 9, 3}}), "lru", 4);
  EXPECT_EQ(r.block_hits, 2u);
  EXPECT_EQ(r.prefix_hits, 1u);
}

TEST(ReplayContractTest, LastToFirstKeepsTheParentMoreRecent) {
  // Capacity 2. r0 {1,2} inserts 2 then 1, so 2 is least recent; r1 {3} evicts 2, not 1.
  // r2 {1,2}: prefix 1 (1 hit, 2 missing).
  const SimResult r = RunPolicy(MakeTrace({{1, 2}, {3}, {1, 2}}), "lru", 2);
  EXPECT_EQ(r.prefix_hits, 1u);
  EXPECT_EQ(r.block_hits, 1u);
}

TEST(ReplayContractTest, OptHandChecked) {
  // Capacity 2. r0 {1}, r1 {2}, r2 {3}, r3 {1}, r4 {2}, r5 {3}.
  // At r2 the residents 1 (next r3) and 2 (next r4) are both needed before 3 (next r5): bypass 3.
  // r3 and r4 hit; r5 misses. LRU gets no hit at all on this cyclic pattern.
  const Trace trace = MakeTrace({{1}, {2}, {3}, {1}, {2}, {3}});
  const SimResult opt = RunPolicy(trace, "opt", 2);
  EXPECT_EQ(opt.block_hits, 2u);
  EXPECT_EQ(opt.prefix_hits, 2u);
  EXPECT_EQ(opt.counters[0].rejected, 2u);  // 3 bypassed at r2 and r5
  EXPECT_EQ(RunPolicy(trace, "lru", 2).block_hits, 0u);
}

TEST(ReplayContractTest, OptKeepsTheParentAtEqualNextUse) {
  // Capacity 1. r0 {1,2}; r1 {1,2}: both next used at r1, so the deeper 2 is evicted when 1
  // arrives, and r1 gets a prefix hit of 1.
  const SimResult r = RunPolicy(MakeTrace({{1, 2}, {1, 2}}), "opt", 1);
  EXPECT_EQ(r.prefix_hits, 1u);
  EXPECT_EQ(r.block_hits, 1u);
}

TEST(ReplayContractTest, TokensSavedAreCappedByThePromptLength) {
  Trace trace = MakeTrace({{1, 2}, {1, 2}}, 16);
  trace.input_tokens[1] = 20;  // the second block is partial
  const SimResult r = RunPolicy(trace, "lru", 8);
  EXPECT_EQ(r.prefix_hits, 2u);
  EXPECT_EQ(r.tokens_saved, 20u);
}

std::string MooncakePath() {
  return std::string(KVTIER_SOURCE_DIR) + "/../shared/traces/mooncake_conversation.jsonl";
}

TEST(ReplayContractTest, MooncakeSanityValues) {
  const std::string path = MooncakePath();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "trace not present: " << path;
  absl::StatusOr<Trace> trace = LoadTrace(path, TraceLoadOptions{});
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->num_requests(), 12031u);
  EXPECT_EQ(trace->num_refs(), 288500u);
  EXPECT_EQ(trace->num_blocks(), 182790u);
  const SimResult lru = RunPolicy(*trace, "lru", 9140);
  EXPECT_NEAR(lru.PrefixHitRatio(), 0.1958, 5e-5);
  const SimResult opt = RunPolicy(*trace, "opt", 9140);
  EXPECT_NEAR(opt.PrefixHitRatio(), 0.3664, 5e-5);
  const SimResult infinite = RunPolicy(*trace, "lru", trace->num_blocks());
  EXPECT_NEAR(infinite.PrefixHitRatio(), 0.3664, 5e-5);
  EXPECT_EQ(opt.prefix_hits, infinite.prefix_hits);
}

}  // namespace
}  // namespace kvtier::replay
