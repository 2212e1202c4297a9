// The tier manager over real tiers: put/get, demotion T1 -> T2 and promotion back, clean
// evictions, leases, admission, watermarks, drop and config errors (issue 3, "Tier manager").
#include "tiers/tier_manager.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <vector>

#include "tests/tiers/tier_manager_test_util.h"

namespace kvtier {
namespace {

using testing::GetAndVerify;
using testing::GetSync;
using testing::InTier;
using testing::KeyOf;
using testing::ManagerOptions;
using testing::MoveLog;
using testing::Put;
using testing::TempDir;

std::unique_ptr<TierManager> Make(const TierManagerOptions& options) {
  auto m = TierManager::Create(options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(TierManagerTest, StoresAndLoadsBlocksOfEverySizeInT1) {
  auto m = Make(ManagerOptions(16, "", 0));
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 12; ++i) ASSERT_EQ(*Put(*m, i), CommitOutcome::kStored);
  for (uint64_t i = 0; i < 12; ++i) {
    EXPECT_TRUE(GetAndVerify(*m, i).ok()) << i;
    EXPECT_TRUE(InTier(*m, i, Tier::kT1));
  }
  EXPECT_EQ(m->Stats().tier(Tier::kT1).hits, 12u);
  EXPECT_EQ(GetSync(*m, KeyOf(99)).status().code(), absl::StatusCode::kNotFound);
}

TEST(TierManagerTest, TheSamePrefixIsStoredOnce) {
  auto m = Make(ManagerOptions(8, "", 0));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(*Put(*m, 1), CommitOutcome::kStored);
  ASSERT_EQ(*Put(*m, 1), CommitOutcome::kAlreadyPresent);
  EXPECT_EQ(m->t1().Stats().used_slots, 1u);  // the second writer's slot went back
  EXPECT_EQ(m->Stats().puts_already_present, 1u);
}

TEST(TierManagerTest, DemotesToT2AndPromotesBackWithTheSameBytes) {
  TempDir tmp;
  auto m = Make(ManagerOptions(16, tmp.path(), 512));
  ASSERT_NE(m, nullptr);
  constexpr uint64_t kBlocks = 300;
  for (uint64_t i = 0; i < kBlocks; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  m->Quiesce();
  EXPECT_EQ(m->index().Size(), kBlocks);  // T2 has room for all: nothing was lost
  std::vector<uint64_t> order(kBlocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (uint64_t i : order) ASSERT_TRUE(GetAndVerify(*m, i).ok()) << i;
  const TierManagerStats s = m->Stats();
  EXPECT_GT(s.tier(Tier::kT1).moved_down, kBlocks - 32);
  EXPECT_GT(s.tier(Tier::kT1).gets_promoted, kBlocks - 32);
  EXPECT_EQ(s.tier(Tier::kT1).promotion_failures, 0u);
  EXPECT_EQ(s.tier(Tier::kT1).moved_down, m->t2()->Stats().writes);
}

TEST(TierManagerTest, EveryFinishedDemotionAndPromotionIsReportedWithItsDuration) {
  TempDir tmp;
  MoveLog log;  // outlives the manager: moves in flight report until it is destroyed
  TierManagerOptions o = ManagerOptions(8, tmp.path(), 64);
  o.on_move = log.Observer();
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  m->Quiesce();
  ASSERT_GT(m->Stats().tier(Tier::kT1).moved_down, 0u);
  const std::vector<double> demoted = log.Seconds(MoveKind::kDemotion, Tier::kT1, Tier::kT2);
  EXPECT_EQ(demoted.size(),
            m->Stats().tier(Tier::kT1).moved_down);  // one report per committed T2 write
  for (double seconds : demoted) EXPECT_GT(seconds, 0);
  EXPECT_TRUE(log.Seconds(MoveKind::kPromotion, Tier::kT2, Tier::kT1).empty());

  ASSERT_FALSE(InTier(*m, 0, Tier::kT1)) << "precondition: block 0 lives only in T2";
  ASSERT_TRUE(GetAndVerify(*m, 0).ok());  // the report came before the Get was answered
  const std::vector<double> promoted = log.Seconds(MoveKind::kPromotion, Tier::kT2, Tier::kT1);
  ASSERT_EQ(promoted.size(), 1u);
  EXPECT_GT(promoted[0], 0);
  ASSERT_TRUE(GetAndVerify(*m, 0).ok());  // in T1 now: no move, no report
  m->Quiesce();
  EXPECT_EQ(log.Seconds(MoveKind::kPromotion, Tier::kT2, Tier::kT1).size(), 1u);
  EXPECT_EQ(log.size(), m->Stats().tier(Tier::kT1).moved_down + 1)
      << "only T1 <-> T2 moves without a T0";
}

TEST(TierManagerTest, ACleanBlockLeavesT1WithoutBeingRewritten) {
  TempDir tmp;
  auto m = Make(ManagerOptions(8, tmp.path(), 256));
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 40; ++i) ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
  m->Quiesce();
  ASSERT_FALSE(InTier(*m, 0, Tier::kT1));
  ASSERT_TRUE(GetAndVerify(*m, 0).ok());  // promoted: now in T1 and still in T2
  EXPECT_TRUE(InTier(*m, 0, Tier::kT1) && InTier(*m, 0, Tier::kT2));
  const uint64_t writes_before = m->t2()->Stats().writes;
  for (uint64_t i = 100; i < 140; ++i) ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
  m->Quiesce();
  EXPECT_FALSE(InTier(*m, 0, Tier::kT1));
  EXPECT_TRUE(InTier(*m, 0, Tier::kT2));
  const TierManagerStats s = m->Stats();
  EXPECT_GE(s.tier(Tier::kT1).clean_evictions, 1u);
  // Every T2 write is one demotion of a block never written before: block 0 was not rewritten.
  EXPECT_EQ(m->t2()->Stats().writes, s.tier(Tier::kT1).moved_down);
  EXPECT_LE(m->t2()->Stats().writes - writes_before, 40u);
  EXPECT_TRUE(GetAndVerify(*m, 0).ok());
}

TEST(TierManagerTest, LeasedBlocksAreNeverEvicted) {
  TempDir tmp;
  auto m = Make(ManagerOptions(8, tmp.path(), 256));
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(Put(*m, 0).ok());
  auto leased = GetSync(*m, KeyOf(0));
  ASSERT_TRUE(leased.ok());
  for (uint64_t i = 1; i < 100; ++i) ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
  m->Quiesce();
  const std::optional<BlockInfo> info = m->index().Find(KeyOf(0));
  ASSERT_TRUE(info && info->InTier(Tier::kT1));
  EXPECT_EQ(info->slots[1], leased->slot);
  ASSERT_TRUE(m->Release(KeyOf(0)).ok());
  ASSERT_TRUE(GetAndVerify(*m, 0).ok());  // the leased copy was never touched
  for (uint64_t i = 100; i < 200; ++i) ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
  m->Quiesce();
  EXPECT_FALSE(InTier(*m, 0, Tier::kT1));  // released, it may go like any other
}

TEST(TierManagerTest, EveryBlockStaysReadableWhileItIsBeingDemoted) {
  TempDir tmp;
  TierManagerOptions o = ManagerOptions(32, tmp.path(), 1024);
  o.t2->durability = T2Durability::kFdatasync;  // slow writes: demotions stay in flight longer
  o.t1_policy.high_watermark = 0.5;
  o.t1_policy.low_watermark = 0.25;
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  std::atomic<uint64_t> committed{0}, reads{0}, failures{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::mt19937_64 rng(3);
    while (!done.load()) {
      const uint64_t n = committed.load();
      if (n == 0) continue;
      if (!GetAndVerify(*m, rng() % n).ok()) failures.fetch_add(1);
      reads.fetch_add(1);
    }
  });
  for (uint64_t i = 0; i < 400; ++i) {
    ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
    committed.store(i + 1);
  }
  done.store(true);
  reader.join();
  EXPECT_EQ(failures.load(), 0u) << "of " << reads.load() << " reads";
  EXPECT_GT(m->Stats().tier(Tier::kT1).moved_down, 0u);
}

TEST(TierManagerTest, T2AdmissionDecidesWhatIsDemoted) {
  TempDir tmp;
  TierManagerOptions o = ManagerOptions(8, tmp.path(), 256);
  o.t2_policy.admission.policy = "second";
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 60; ++i) ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
  m->Quiesce();
  const TierManagerStats s = m->Stats();
  EXPECT_GT(s.tier(Tier::kT1).rejected, 40u);  // each block was offered once: never admitted
  EXPECT_EQ(s.tier(Tier::kT1).moved_down, 0u);
  EXPECT_EQ(GetSync(*m, KeyOf(0)).status().code(), absl::StatusCode::kNotFound);
  for (uint64_t i = 0; i < 60; ++i) {
    const absl::Status st = GetAndVerify(*m, i);
    EXPECT_TRUE(st.ok() || st.code() == absl::StatusCode::kNotFound) << st;  // never wrong data
  }
}

TEST(TierManagerTest, WithoutT2VictimsAreDropped) {
  auto m = Make(ManagerOptions(8, "", 0));
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 50; ++i) ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
  m->Quiesce();
  EXPECT_LE(m->index().Size(), 8u);
  EXPECT_GE(m->Stats().tier(Tier::kT1).dropped, 42u);
  EXPECT_EQ(GetSync(*m, KeyOf(0)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(GetAndVerify(*m, 49).ok());
}

TEST(TierManagerTest, WatermarksBoundOccupancy) {
  TempDir tmp;
  TierManagerOptions o = ManagerOptions(100, tmp.path(), 1000);
  o.t1_policy.high_watermark = 0.8;
  o.t1_policy.low_watermark = 0.5;
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 79; ++i) ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
  m->Quiesce();
  EXPECT_EQ(m->t1().Stats().used_slots, 79u);  // at the high watermark: nothing moves yet
  ASSERT_TRUE(Put(*m, 79).ok());
  ASSERT_TRUE(Put(*m, 80).ok());
  m->Quiesce();
  EXPECT_EQ(m->t1().Stats().used_slots, 50u);  // drained to the low watermark
  EXPECT_EQ(m->index().Size(), 81u);
}

// Leased blocks at the front of a full tier's LRU order are looked at once, not by every
// allocation that passes over them (Mover::ChooseUnleasedLocked): 48 leased at the front of 64
// slots, then 32 puts. Passing over all 48 for each put looks at 32 * 49 = 1,568 candidates.
TEST(TierManagerTest, AllocationsIntoAFullTierDoNotRescanItsLeasedBlocks) {
  TierManagerOptions o = ManagerOptions(64, "", 0);  // no T2: victims are dropped
  o.t1_policy.low_watermark = 1.0;                   // the evictor sheds as little as it can
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 64; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  for (uint64_t i = 0; i < 48; ++i) ASSERT_TRUE(GetSync(*m, KeyOf(i)).ok()) << i;  // leased
  for (uint64_t i = 48; i < 64; ++i) ASSERT_TRUE(GetAndVerify(*m, i).ok()) << i;   // used since
  m->Quiesce();
  const uint64_t before = m->Stats().eviction_candidates;
  for (uint64_t i = 64; i < 96; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  m->Quiesce();
  const uint64_t looked = m->Stats().eviction_candidates - before;
  EXPECT_GE(looked, 32u);
  EXPECT_LT(looked, 400u);
  for (uint64_t i = 0; i < 48; ++i) {
    EXPECT_TRUE(InTier(*m, i, Tier::kT1)) << "leased block " << i << " was evicted";
    ASSERT_TRUE(m->Release(KeyOf(i)).ok());
  }
}

// Many slots of a full tier at once: unleased victims leave for them, leased ones stay, and what
// could not be had is said (ResourceExhausted: retry).
TEST(TierManagerTest, AllocatingManySlotsFreesVictimsAndStopsAtTheLeasedOnes) {
  auto m = Make(ManagerOptions(8, "", 0));  // no T2: victims are dropped
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(GetSync(*m, KeyOf(i)).ok()) << i;  // leased
  m->Quiesce();
  TierManager::Allocation two = m->AllocateManyForPut(Tier::kT1, 2);
  EXPECT_TRUE(two.status.ok()) << two.status;
  EXPECT_EQ(two.slots.size(), 2u);
  TierManager::Allocation more = m->AllocateManyForPut(Tier::kT1, 4);
  EXPECT_EQ(more.status.code(), absl::StatusCode::kResourceExhausted) << more.status;
  EXPECT_EQ(more.slots.size(), 1u);  // the third unleased block's slot; the leased stay
  for (uint64_t i = 0; i < 5; ++i) EXPECT_TRUE(InTier(*m, i, Tier::kT1)) << i;
  for (SlotId s : two.slots) EXPECT_TRUE(m->AbortPut(s).ok());
  for (SlotId s : more.slots) EXPECT_TRUE(m->AbortPut(s).ok());
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(m->Release(KeyOf(i)).ok());
  EXPECT_EQ(m->AllocateManyForPut(Tier::kT2, 1).status.code(), absl::StatusCode::kInvalidArgument);
}

// A full tier where no block can leave is not looked at again by every refused allocation: the
// choice remembers it until a lease ends (Mover::NoVictim), and the next allocation after the
// release gets a slot.
TEST(TierManagerTest, RefusedAllocationsDoNotLookAtEveryLeasedBlockAgain) {
  TierManagerOptions o = ManagerOptions(64, "", 0);
  o.t1_policy.low_watermark = 1.0;
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(Put(*m, i).ok()) << i;
    ASSERT_TRUE(GetSync(*m, KeyOf(i)).ok()) << i;  // leased: T1 is full of leased blocks
  }
  m->Quiesce();
  const TierManagerStats before = m->Stats();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(m->AllocateForPut().status().code(), absl::StatusCode::kResourceExhausted);
  }
  const TierManagerStats after = m->Stats();
  // One look at the 64 (and the evictor's own, at most as many); 20 x 64 without the memory.
  EXPECT_LE(after.eviction_candidates - before.eviction_candidates, 3u * 64) << "looked again";
  EXPECT_GE(after.eviction_choices_skipped - before.eviction_choices_skipped, 15u);
  ASSERT_TRUE(m->Release(KeyOf(5)).ok());
  const absl::StatusOr<SlotId> slot = m->AllocateForPut();
  EXPECT_TRUE(slot.ok()) << "a released block is a victim again at once: " << slot.status()
                         << "; looked at "
                         << m->Stats().eviction_candidates - after.eviction_candidates
                         << ", skipped "
                         << m->Stats().eviction_choices_skipped - after.eviction_choices_skipped;
  for (uint64_t i = 0; i < 64; ++i) {
    if (i == 5) continue;
    ASSERT_TRUE(m->Release(KeyOf(i)).ok());
  }
}

TEST(TierManagerTest, AFullT1OfLeasedBlocksRefusesPutsUntilReleased) {
  auto m = Make(ManagerOptions(4, "", 0));
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
    ASSERT_TRUE(GetSync(*m, KeyOf(i)).ok());
  }
  m->Quiesce();
  EXPECT_EQ(m->AllocateForPut().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->Stats().puts_refused_full, 1u);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(m->Release(KeyOf(i)).ok());
  EXPECT_TRUE(Put(*m, 4).ok());
}

// A read waiting for a slot of a full rung whose watermarks ask for no shedding (low 1.0) must
// still be answered: with every block leased, ResourceExhausted (retry), never a hang. (The T0
// twin of this hung on the H100 before the evictor looked at waiting reads.)
TEST(TierManagerTest, AReadIntoAFullT1OfLeasedBlocksFailsEvenWithNoWatermarkToShed) {
  TempDir tmp;
  TierManagerOptions o = ManagerOptions(4, tmp.path(), 64);
  o.t1_policy.low_watermark = 1.0;
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(Put(*m, 0).ok());
  ASSERT_TRUE(m->FlushT1(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  ASSERT_FALSE(InTier(*m, 0, Tier::kT1));  // block 0 is in T2 only
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(Put(*m, i).ok()) << i;
    ASSERT_TRUE(GetSync(*m, KeyOf(i)).ok()) << i;  // leased: T1 is full of leased blocks
  }
  EXPECT_EQ(GetSync(*m, KeyOf(0)).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->index().Find(KeyOf(0))->leases, 0u);
  ASSERT_TRUE(m->Release(KeyOf(1)).ok());
  EXPECT_TRUE(GetAndVerify(*m, 0).ok());  // block 1 (with a T2 copy or not) made room
}

TEST(TierManagerTest, DropRemovesTheBlockFromEveryTierAndFromDisk) {
  TempDir tmp;
  {
    auto m = Make(ManagerOptions(4, tmp.path(), 64));
    ASSERT_NE(m, nullptr);
    for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(Put(*m, i).ok()) << Put(*m, i).status();
    m->Quiesce();
    ASSERT_TRUE(GetAndVerify(*m, 0).ok()) << GetAndVerify(*m, 0);  // in T1 and T2 now
    ASSERT_TRUE(GetSync(*m, KeyOf(1)).ok());
    EXPECT_EQ(m->Drop(KeyOf(1)).code(), absl::StatusCode::kFailedPrecondition);  // leased
    ASSERT_TRUE(m->Release(KeyOf(1)).ok());
    ASSERT_TRUE(m->Drop(KeyOf(0)).ok());
    EXPECT_EQ(m->Drop(KeyOf(0)).code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(GetSync(*m, KeyOf(0)).status().code(), absl::StatusCode::kNotFound);
  }
  auto m = Make(ManagerOptions(4, tmp.path(), 64));  // restart: block 0's record is gone
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->index().Find(KeyOf(0)).has_value());
  EXPECT_TRUE(GetAndVerify(*m, 1).ok());
}

TEST(TierManagerTest, RejectsBadOptionsNamingTheSetting) {
  TierManagerOptions o = ManagerOptions(4, "", 0);
  o.t1_policy.high_watermark = 0.5;
  o.t1_policy.low_watermark = 0.6;
  EXPECT_NE(TierManager::Create(o).status().message().find("t1.low_watermark"), std::string::npos);
  o = ManagerOptions(4, "/nonexistent-kvtier-dir", 4);
  o.t2->slot_bytes = 2 * testing::kTestSlot;
  EXPECT_NE(TierManager::Create(o).status().message().find("t2.slot_bytes"), std::string::npos);
  o = ManagerOptions(4, "", 0);
  o.t2_policy.eviction.policy = "mru";
  EXPECT_NE(TierManager::Create(o).status().message().find("t2.eviction.policy"),
            std::string::npos);
  o = ManagerOptions(4, "/nonexistent-kvtier-dir", 4);
  EXPECT_NE(TierManager::Create(o).status().message().find("t2.directories[0]"), std::string::npos);
}

}  // namespace
}  // namespace kvtier
