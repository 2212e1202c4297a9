// Multi-tier semantics of the simulated tier stack (tools/replay/tier_stack.h): promotion keeps
// the lower copy, a clean victim is not written again, admission rejection, demotion counts, hit
// attribution per tier, bytes, and leaf-first eviction.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/tools/replay_test_util.h"
#include "tools/replay/report.h"
#include "tools/replay/simulator.h"
#include "tools/replay/tier_stack.h"

namespace kvtier::replay {
namespace {

TierConfig Tier(const std::string& name, uint64_t capacity, const std::string& admission = "all",
                bool leaf_first = false) {
  TierConfig tier;
  tier.name = name;
  tier.capacity_blocks = capacity;
  tier.admission.policy = admission;
  tier.admission.window_blocks = 1024;
  tier.leaf_first = leaf_first;
  return tier;
}

std::unique_ptr<TierStack> MakeStack(const std::vector<TierConfig>& tiers,
                                     const std::vector<uint64_t>& ghosts) {
  absl::StatusOr<std::unique_ptr<TierStack>> stack = TierStack::Create(tiers, ghosts);
  EXPECT_TRUE(stack.ok()) << stack.status();
  return stack.ok() ? std::move(*stack) : nullptr;
}

constexpr BlockId kA = 0, kB = 1, kC = 2;
const std::vector<uint64_t> kGhosts = {100, 101, 102, 103};

TEST(TierStackTest, PromotionKeepsTheLowerCopyAndACleanVictimIsNotRewritten) {
  auto stack = MakeStack({Tier("T0", 1), Tier("T1", 10)}, kGhosts);
  stack->Reference(kA, kNoParent);  // written into T0
  stack->Reference(kB, kNoParent);  // written into T0; A demoted into T1
  EXPECT_EQ(stack->ResidentMask(kA), 0b10);
  stack->Reference(kA, kNoParent);  // promoted from T1; B demoted into T1
  EXPECT_EQ(stack->ResidentMask(kA), 0b11) << "promotion keeps the T1 copy";
  EXPECT_EQ(stack->ResidentMask(kB), 0b10);
  stack->Reference(kB, kNoParent);  // promoted from T1; A evicted from T0 but already in T1: clean
  EXPECT_EQ(stack->ResidentMask(kA), 0b10);
  EXPECT_EQ(stack->ResidentMask(kB), 0b11);
  EXPECT_EQ(stack->counters(0).written, 2u);
  EXPECT_EQ(stack->counters(0).evictions, 3u);
  EXPECT_EQ(stack->counters(0).demoted, 2u) << "the third victim was clean";
  EXPECT_EQ(stack->counters(1).promoted, 2u);
  EXPECT_EQ(stack->counters(1).written, 0u);
  EXPECT_EQ(stack->Size(1), 2u);
}

TEST(TierStackTest, AdmissionRejectsTheFirstOfferAndAdmitsTheSecond) {
  auto stack = MakeStack({Tier("T0", 4, "second")}, kGhosts);
  stack->Reference(kA, kNoParent);
  EXPECT_EQ(stack->ResidentMask(kA), 0);
  EXPECT_EQ(stack->counters(0).rejected, 1u);
  stack->Reference(kA, kNoParent);
  EXPECT_EQ(stack->ResidentMask(kA), 1);
  EXPECT_EQ(stack->counters(0).written, 1u);
}

TEST(TierStackTest, PutsGoToThePutTierAndReadsCopyIntoTheReadTier) {
  absl::StatusOr<std::unique_ptr<TierStack>> stack = TierStack::Create(
      {Tier("T0", 4, "second"), Tier("T1", 4)}, kGhosts, StackShape{.put_tier = 1, .read_tier = 0});
  ASSERT_TRUE(stack.ok()) << stack.status();
  (*stack)->Reference(kA, kNoParent);
  EXPECT_EQ((*stack)->ResidentMask(kA), 0b10) << "born in T1 (never offered to T0)";
  EXPECT_EQ((*stack)->counters(1).written, 1u);
  (*stack)->Reference(kA, kNoParent);  // a read into T0, which T0's admission does not gate
  EXPECT_EQ((*stack)->ResidentMask(kA), 0b11) << "the read keeps the T1 copy";
  EXPECT_EQ((*stack)->counters(1).promoted, 1u);
  EXPECT_EQ((*stack)->rung_counters(0).gets_promoted, 1u);
}

TEST(TierStackTest, AReadClimbsOneTierAtATime) {
  absl::StatusOr<std::unique_ptr<TierStack>> stack =
      TierStack::Create({Tier("T0", 4), Tier("T1", 1), Tier("T2", 4)}, kGhosts,
                        StackShape{.put_tier = 1, .read_tier = 0});
  ASSERT_TRUE(stack.ok()) << stack.status();
  (*stack)->Reference(kA, kNoParent);
  (*stack)->Reference(kB, kNoParent);  // T1 holds one: A moves down into T2
  EXPECT_EQ((*stack)->ResidentMask(kA), 0b100);
  (*stack)->Reference(kA, kNoParent);  // T2 -> T1 -> T0, as the daemon's mover copies it
  EXPECT_EQ((*stack)->ResidentMask(kA) & 0b11, 0b11);
  EXPECT_EQ((*stack)->counters(2).promoted, 1u);
  EXPECT_EQ((*stack)->counters(1).promoted, 1u);
}

// A remote tier below NVMe (the daemon's T3): its copies climb straight into the host tier, never
// through T2, and its round trip costs a request once.
TEST(TierStackTest, ARemoteTiersReadsClimbStraightToTheTierItNames) {
  TierConfig remote = Tier("T3", 8);
  remote.climb_to = 0;
  absl::StatusOr<std::unique_ptr<TierStack>> stack =
      TierStack::Create({Tier("T1", 1), Tier("T2", 1), remote}, kGhosts);
  ASSERT_TRUE(stack.ok()) << stack.status();
  (*stack)->Reference(kA, kNoParent);
  (*stack)->Reference(kB, kNoParent);  // A: T1 -> T2
  (*stack)->Reference(kC, kNoParent);  // B: T1 -> T2, A: T2 -> T3
  EXPECT_EQ((*stack)->ResidentMask(kA), 0b100);
  (*stack)->Reference(kA, kNoParent);  // T3 -> T1, not through T2
  EXPECT_EQ((*stack)->ResidentMask(kA) & 0b011, 0b001);
  EXPECT_EQ((*stack)->counters(2).promoted, 1u);
  EXPECT_EQ((*stack)->counters(1).promoted, 0u);
}

TEST(TierStackTest, WatermarksShedDownToTheLowOne) {
  TierConfig tier = Tier("T0", 10);
  tier.high_watermark = 0.8;
  tier.low_watermark = 0.5;
  std::vector<uint64_t> ghosts(16);
  auto stack = MakeStack({tier}, ghosts);
  for (BlockId id = 0; id < 8; ++id) stack->Reference(id, kNoParent);
  EXPECT_EQ(stack->Size(0), 8u) << "at the high watermark, not above it";
  stack->Reference(8, kNoParent);  // above 8: shed down to 5
  EXPECT_EQ(stack->Size(0), 5u);
  EXPECT_EQ(stack->counters(0).evictions, 4u);
}

TEST(TierStackTest, AVictimRejectedBelowIsDropped) {
  auto stack = MakeStack({Tier("T0", 1), Tier("T1", 4, "second")}, kGhosts);
  stack->Reference(kA, kNoParent);
  stack->Reference(kB, kNoParent);  // A's demotion is T1's first sight of A: rejected
  EXPECT_EQ(stack->ResidentMask(kA), 0);
  EXPECT_EQ(stack->counters(0).demoted, 0u);
  EXPECT_EQ(stack->counters(0).rejected, 1u) << "counted on the victim's tier";
  stack->Reference(kA, kNoParent);  // written into T0 again; B's demotion is rejected too
  stack->Reference(kB, kNoParent);  // rewritten; A's second demotion attempt is admitted
  EXPECT_EQ(stack->ResidentMask(kA), 0b10);
  EXPECT_EQ(stack->counters(0).demoted, 1u);
}

TEST(TierStackTest, VictimsOfTheLastTierAreGone) {
  auto stack = MakeStack({Tier("T0", 1), Tier("T1", 1)}, kGhosts);
  stack->Reference(kA, kNoParent);
  stack->Reference(kB, kNoParent);
  stack->Reference(kC, kNoParent);  // B demoted into T1, A evicted from T1
  EXPECT_EQ(stack->ResidentMask(kA), 0);
  EXPECT_EQ(stack->ResidentMask(kB), 0b10);
  EXPECT_EQ(stack->counters(1).evictions, 1u);
  EXPECT_EQ(stack->counters(1).demoted, 0u);
}

TEST(TierStackTest, LeafFirstEvictsTheChildBeforeItsParent) {
  for (bool leaf_first : {false, true}) {
    auto stack = MakeStack({Tier("T0", 2, "all", leaf_first)}, kGhosts);
    stack->Reference(kA, kNoParent);
    stack->Reference(kB, kA);  // B is A's child
    stack->Reference(kB, kA);  // touched: A is now the least recent
    stack->Reference(kC, kNoParent);
    if (leaf_first) {
      EXPECT_EQ(stack->ResidentMask(kA), 1) << "A has a resident child";
      EXPECT_EQ(stack->ResidentMask(kB), 0);
    } else {
      EXPECT_EQ(stack->ResidentMask(kA), 0) << "plain LRU evicts the least recent";
      EXPECT_EQ(stack->ResidentMask(kB), 1);
    }
  }
}

TEST(TierStackTest, OptIsRefusedInAStack) {
  TierConfig opt = Tier("T0", 4);
  opt.eviction.policy = "opt";
  EXPECT_FALSE(ValidateTiers({opt, Tier("T1", 4)}).ok());
  EXPECT_TRUE(ValidateTiers({opt}).ok());
}

TEST(SimulatorTiersTest, HitsAndPrefixHitsAreAttributedToTheHighestTier) {
  // T0 of 2 blocks over T1 of 8, LRU. r0 {1,2}: T0 = 1 2. r1 {7}: evicts 2 into T1.
  // r2 {1,2}: 1 hits in T0, 2 in T1, both prefix hits (16 tokens each). Inserting 2 promotes it
  // and demotes 1; touching 1 promotes it back and demotes 7.
  const Trace trace = testing::MakeTrace({{1, 2}, {7}, {1, 2}}, 16);
  SimOptions options;
  options.block_bytes = 1000;
  absl::StatusOr<SimResult> r = Simulate(trace, {Tier("T0", 2), Tier("T1", 8)}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counters[0].block_hits, 1u);
  EXPECT_EQ(r->counters[1].block_hits, 1u);
  EXPECT_EQ(r->counters[0].prefix_hits, 1u);
  EXPECT_EQ(r->counters[1].prefix_hits, 1u);
  EXPECT_EQ(r->counters[0].tokens_saved, 16u);
  EXPECT_EQ(r->counters[1].tokens_saved, 16u);
  EXPECT_EQ(r->prefix_hits, 2u);
  EXPECT_EQ(r->counters[0].written, 3u);
  EXPECT_EQ(r->counters[0].demoted, 3u);
  EXPECT_EQ(r->counters[1].promoted, 2u);
  // Bytes in the report are blocks x block_bytes.
  ReplayReport report;
  report.block_bytes = 1000;
  report.result = *r;
  const nlohmann::json j = ReportJson(report);
  EXPECT_EQ(j["tiers"][1]["promoted_bytes"], 2000u);
  EXPECT_EQ(j["tiers"][0]["demoted_bytes"], 3000u);
  EXPECT_EQ(j["tiers"][0]["written_bytes"], 3000u);
  EXPECT_EQ(j["prefix_hits"], 2u);
}

TEST(SimulatorTiersTest, TtftSavingIsPrefillTimeMinusReadTime) {
  // r1's prefix is 2 blocks x 100 tokens from T0: at 1000 tokens/s that saves 0.2 s of prefill;
  // reading 2 x 1e8 bytes at 10 GB/s costs 0.02 s. Saving 0.18 s.
  const Trace trace = testing::MakeTrace({{1, 2}, {1, 2}}, 100);
  SimOptions options;
  options.block_bytes = 100'000'000;
  options.cost.prefill_tokens_per_s = 1000;
  options.cost.read_gbps = {10};
  absl::StatusOr<SimResult> r = Simulate(trace, {Tier("T0", 8)}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->ttft_saving_s, 0.18, 1e-9);
  // A read slower than recomputing saves nothing rather than a negative time.
  options.cost.read_gbps = {0.1};
  r = Simulate(trace, {Tier("T0", 8)}, options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ttft_saving_s, 0.0);
}

TEST(SimulatorTiersTest, ATiersLatencyCostsEachRequestThatReadsFromItOnce) {
  // As above, with 5 ms of latency per request reading T0: 0.18 - 0.005 s.
  const Trace trace = testing::MakeTrace({{1, 2}, {1, 2}}, 100);
  SimOptions options;
  options.block_bytes = 100'000'000;
  options.cost.prefill_tokens_per_s = 1000;
  options.cost.read_gbps = {10};
  options.cost.read_latency_s = {0.005};
  absl::StatusOr<SimResult> r = Simulate(trace, {Tier("T0", 8)}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->ttft_saving_s, 0.175, 1e-9);
}

}  // namespace
}  // namespace kvtier::replay
