// Replay and the daemon place blocks the same way, block for block: one trace through a real
// TierManager (T1 in memory, T2 on real files with io_uring and RocksDB, in replay-exact mode:
// settle_each_move) and through `kvtier replay`'s tier stack (tools/replay/tier_stack.h) over the
// same ladder settings. Before every request, every block of it must be in the same tiers on both
// sides, and the ladders' counters must end equal.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/tiers/tier_manager_test_util.h"
#include "tools/replay/tier_stack.h"

namespace kvtier::testing {
namespace {

// Prefix-chained requests over `blocks` ids: a few shared prefixes of random length, each request
// one of them plus a random private tail (how conversations and system prompts look).
std::vector<std::vector<BlockId>> MakeTrace(uint32_t seed, size_t requests, BlockId blocks) {
  std::mt19937 rng(seed);
  std::vector<std::vector<BlockId>> prefixes(6);
  BlockId next = 0;
  for (auto& p : prefixes) {
    const size_t len = 1 + rng() % 6;
    for (size_t i = 0; i < len && next < blocks; ++i) p.push_back(next++);
  }
  std::vector<std::vector<BlockId>> trace;
  for (size_t r = 0; r < requests; ++r) {
    std::vector<BlockId> request = prefixes[rng() % prefixes.size()];
    const size_t tail = rng() % 5;
    for (size_t i = 0; i < tail; ++i) request.push_back(next + static_cast<BlockId>(rng() % 3));
    if (rng() % 2 == 0) next = std::min<BlockId>(next + 3, blocks - 3);
    trace.push_back(std::move(request));
  }
  return trace;
}

struct Shape {
  const char* t1_policy;
  const char* t2_policy;
  const char* t2_admission;
};

class LadderDifferentialTest : public ::testing::TestWithParam<Shape> {};

// What the daemon holds of `id`, as replay's mask: bit 0 = T1, bit 1 = T2.
uint8_t DaemonMask(TierManager& m, BlockId id) {
  std::optional<BlockInfo> info = m.index().Find(KeyOf(id));
  return info ? static_cast<uint8_t>(info->tiers >> 1) : 0;
}

TEST_P(LadderDifferentialTest, ReplayAndTheDaemonAgreeBlockForBlock) {
  const Shape shape = GetParam();
  constexpr uint32_t kT1Slots = 24, kT2Slots = 64;
  constexpr BlockId kBlocks = 400;
  TempDir dir;
  TierManagerOptions o = ManagerOptions(kT1Slots, dir.path(), kT2Slots);
  o.t1.first_ready_bytes = 0;  // all of T1 usable before the first put
  o.t1_policy.eviction.policy = shape.t1_policy;
  o.t1_policy.high_watermark = 0.75;
  o.t1_policy.low_watermark = 0.5;
  o.t2_policy.eviction.policy = shape.t2_policy;
  o.t2_policy.admission.policy = shape.t2_admission;
  o.t2_policy.admission.window_blocks = 64;
  o.t2_policy.high_watermark = 0.9;
  o.t2_policy.low_watermark = 0.7;
  o.max_demotions_in_flight = 1;
  o.settle_each_move = true;
  absl::StatusOr<std::unique_ptr<TierManager>> made = TierManager::Create(o);
  ASSERT_TRUE(made.ok()) << made.status();
  TierManager& m = **made;
  ASSERT_EQ(m.t2()->capacity_slots(), kT2Slots);

  std::vector<replay::TierConfig> tiers(2);
  for (int t = 0; t < 2; ++t) {
    const TierPolicyOptions& p = t == 0 ? o.t1_policy : o.t2_policy;
    tiers[t].name = t == 0 ? "T1" : "T2";
    tiers[t].capacity_blocks = t == 0 ? kT1Slots : kT2Slots;
    tiers[t].eviction = p.eviction;
    tiers[t].admission = p.admission;
    tiers[t].high_watermark = p.high_watermark;
    tiers[t].low_watermark = p.low_watermark;
  }
  std::vector<uint64_t> ghosts(kBlocks);
  for (BlockId id = 0; id < kBlocks; ++id) ghosts[id] = KeyOf(id).lo;  // the daemon's ghost keys
  absl::StatusOr<std::unique_ptr<replay::TierStack>> stack =
      replay::TierStack::Create(tiers, ghosts);
  ASSERT_TRUE(stack.ok()) << stack.status();

  const std::vector<std::vector<BlockId>> trace = MakeTrace(7, 600, kBlocks);
  uint64_t hits = 0;
  for (size_t r = 0; r < trace.size(); ++r) {
    const std::vector<BlockId>& request = trace[r];
    for (BlockId id : request) {
      ASSERT_EQ(DaemonMask(m, id), (*stack)->ResidentMask(id))
          << "request " << r << ", block " << id;
      hits += (*stack)->ResidentMask(id) != 0;
    }
    for (size_t i = request.size(); i-- > 0;) {  // replay's order: last to first
      const BlockId id = request[i];
      if (DaemonMask(m, id) != 0) {
        ASSERT_TRUE(GetAndVerify(m, id).ok()) << "request " << r << ", block " << id;
      } else {
        ASSERT_TRUE(Put(m, id).ok()) << "request " << r << ", block " << id;
      }
      m.Quiesce();
      (*stack)->Reference(id, i > 0 ? request[i - 1] : replay::kNoParent);
      const TierManagerStats now = m.Stats();
      for (int t = 0; t < 2; ++t) {
        const RungCounters& d = now.tier(t == 0 ? Tier::kT1 : Tier::kT2);
        const RungCounters e = (*stack)->rung_counters(static_cast<size_t>(t));
#define KVTIER_EXPECT_COUNTER(name, help) \
  ASSERT_EQ(d.name, e.name) << #name << ", tier " << t << ", request " << r << ", block " << id;
        KVTIER_RUNG_COUNTERS(KVTIER_EXPECT_COUNTER)
#undef KVTIER_EXPECT_COUNTER
      }
    }
  }
  const TierManagerStats s = m.Stats();
  for (int t = 0; t < 2; ++t) {
    const RungCounters& daemon = s.tier(t == 0 ? Tier::kT1 : Tier::kT2);
    const RungCounters sim = (*stack)->rung_counters(static_cast<size_t>(t));
    EXPECT_EQ(daemon.evictions, sim.evictions) << "tier " << t;
    EXPECT_EQ(daemon.clean_evictions, sim.clean_evictions) << "tier " << t;
    EXPECT_EQ(daemon.moved_down, sim.moved_down) << "tier " << t;
    EXPECT_EQ(daemon.rejected, sim.rejected) << "tier " << t;
    EXPECT_EQ(daemon.dropped, sim.dropped) << "tier " << t;
    EXPECT_EQ(daemon.born, sim.born) << "tier " << t;
    EXPECT_EQ(daemon.gets_promoted, sim.gets_promoted) << "tier " << t;
  }
  // The trace must exercise the ladder, or agreement proves nothing.
  EXPECT_GT(s.tier(Tier::kT1).moved_down, 20u);
  EXPECT_GT(s.tier(Tier::kT1).evictions, 100u);
  EXPECT_GT(s.tier(Tier::kT1).gets_promoted, 10u);
  EXPECT_GT(hits, 500u);
}

INSTANTIATE_TEST_SUITE_P(Policies, LadderDifferentialTest,
                         ::testing::Values(Shape{"lru", "lru", "all"},
                                           Shape{"lru", "fifo", "second"},
                                           Shape{"s3fifo", "sieve", "all"},
                                           Shape{"arc", "s3fifo", "second"}));

}  // namespace
}  // namespace kvtier::testing
