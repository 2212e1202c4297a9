// T1 ready at once (issue 12): HostTier::Create returns once the first part of the segment is
// usable, the rest grows in the background in chunk order, slots become allocatable chunk by chunk,
// and a tier destroyed mid-growth stops cleanly. The growth is held at a chunk boundary with
// HostTierOptions::before_touch_for_test, so what the tier serves meanwhile is deterministic.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "tests/tiers/host_tier_test_util.h"
#include "tests/tiers/tier_manager_test_util.h"
#include "tiers/host_tier.h"
#include "tiers/tier_manager.h"

namespace kvtier {
namespace {

using testing::Gate;
using testing::WaitForReadySlots;

constexpr uint32_t kSlot = 64 * 1024;
constexpr uint64_t kMiB = 1 << 20;
// Chunks of 1, 2, 4, 4, 4 and 1 MiB (first_ready_bytes 1 MiB doubling up to dma_chunk_bytes 4 MiB):
// ends at 1, 3, 7, 11, 15 and 16 MiB.
constexpr uint64_t kCapacity = 16 * kMiB;
constexpr uint32_t kSlotsInFirstTwoChunks = 3 * kMiB / kSlot;

HostTierOptions GrowingOptions() {
  HostTierOptions o;
  o.capacity_bytes = kCapacity;
  o.slot_bytes = kSlot;
  o.touch_threads = 1;
  o.huge_pages = HugePages::kOff;
  o.dma_chunk_bytes = 4 * kMiB;
  o.first_ready_bytes = 1 * kMiB;
  return o;
}

TEST(HostTierGrowthTest, ServesTheFirstChunksWhileTheRestIsHeldThenGrowsToAll) {
  std::unique_ptr<HostTier> tier;
  Gate gate(3 * kMiB);  // chunks 0 and 1 come; chunk 2 (from 3 MiB) waits
  HostTierOptions o = GrowingOptions();
  o.before_touch_for_test = gate.Hook();
  absl::StatusOr<std::unique_ptr<HostTier>> created = HostTier::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  tier = std::move(*created);
  EXPECT_GE(tier->ready_slots(), kMiB / kSlot);  // Create waited for the first part
  EXPECT_EQ(tier->capacity_slots(), kCapacity / kSlot);
  ASSERT_NO_FATAL_FAILURE(WaitForReadySlots(*tier, kSlotsInFirstTwoChunks));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(tier->ready_slots(), kSlotsInFirstTwoChunks);  // held at the chunk boundary
  EXPECT_FALSE(tier->dma().done());
  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.ready_slots, kSlotsInFirstTwoChunks);
  EXPECT_EQ(stats.capacity_slots, kCapacity / kSlot);

  // Only ready slots are handed out, lowest first; then the tier answers "full" for now.
  std::set<SlotId> slots;
  for (uint32_t i = 0; i < kSlotsInFirstTwoChunks; ++i) {
    absl::StatusOr<SlotId> slot = tier->Allocate();
    ASSERT_TRUE(slot.ok()) << i << ": " << slot.status();
    EXPECT_LT(*slot, kSlotsInFirstTwoChunks);
    slots.insert(*slot);
  }
  EXPECT_EQ(slots.size(), kSlotsInFirstTwoChunks);
  EXPECT_EQ(tier->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  std::memset(tier->SlotData(*slots.rbegin()), 0x5a, kSlot);  // ready memory is writable
  EXPECT_EQ(tier->Stats().used_slots, kSlotsInFirstTwoChunks);

  gate.Open();
  EXPECT_TRUE(tier->dma().Wait().ok());  // CPU build: nothing to register, OK
  EXPECT_EQ(tier->ready_slots(), tier->capacity_slots());
  EXPECT_EQ(tier->dma().ready_bytes(), kCapacity);
  EXPECT_GT(tier->dma().first_ready_seconds(), 0);
  EXPECT_GE(tier->dma().seconds(), tier->dma().first_ready_seconds());
  for (uint32_t i = kSlotsInFirstTwoChunks; i < tier->capacity_slots(); ++i) {
    absl::StatusOr<SlotId> slot = tier->Allocate();
    ASSERT_TRUE(slot.ok()) << i << ": " << slot.status();
    EXPECT_TRUE(slots.insert(*slot).second) << *slot;
  }
  EXPECT_EQ(tier->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(tier->Stats().used_slots, tier->capacity_slots());
}

TEST(HostTierGrowthTest, ReadySlotsOnlyGrowAndReachTheCapacity) {
  HostTierOptions o = GrowingOptions();
  o.before_touch_for_test = [](uint64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  absl::StatusOr<std::unique_ptr<HostTier>> tier = HostTier::Create(o);
  ASSERT_TRUE(tier.ok()) << tier.status();
  std::vector<uint32_t> seen = {(*tier)->ready_slots()};
  while (!(*tier)->dma().done()) {
    seen.push_back((*tier)->Stats().ready_slots);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  seen.push_back((*tier)->ready_slots());
  EXPECT_LT(seen.front(), (*tier)->capacity_slots());  // Create did not wait for it all
  EXPECT_EQ(seen.back(), (*tier)->capacity_slots());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  // Every value seen is a chunk boundary: slots come a whole chunk at a time.
  const std::set<uint32_t> boundaries = {16, 48, 112, 176, 240, 256};
  for (uint32_t v : seen) EXPECT_TRUE(boundaries.count(v)) << v;
}

TEST(HostTierGrowthTest, FirstReadyBytesZeroWaitsForTheWholeSegment) {
  HostTierOptions o = GrowingOptions();
  o.first_ready_bytes = 0;
  absl::StatusOr<std::unique_ptr<HostTier>> tier = HostTier::Create(o);
  ASSERT_TRUE(tier.ok()) << tier.status();
  EXPECT_EQ((*tier)->ready_slots(), (*tier)->capacity_slots());
}

TEST(HostTierGrowthTest, DestroyedWhileGrowingStopsAfterTheChunkInProgress) {
  std::unique_ptr<HostTier> tier;
  Gate gate(3 * kMiB);
  HostTierOptions o = GrowingOptions();
  o.before_touch_for_test = gate.Hook();
  absl::StatusOr<std::unique_ptr<HostTier>> created = HostTier::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  tier = std::move(*created);
  ASSERT_NO_FATAL_FAILURE(WaitForReadySlots(*tier, kSlotsInFirstTwoChunks));
  ASSERT_TRUE(tier->Allocate().ok());
  // The destructor asks the growth to stop, then waits for the held chunk; open the gate once it
  // waits, from here.
  std::thread destroy([&tier] { tier.reset(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  gate.Open();
  destroy.join();
  EXPECT_EQ(tier, nullptr);
  EXPECT_EQ(gate.touched(), 2);  // chunks 1 and 2 began; 3, 4 and 5 never did
}

// The tier manager stores puts in the ready part while the rest of T1 is held.
TEST(HostTierGrowthTest, TierManagerStoresPutsBeforeT1IsFullyReady) {
  std::unique_ptr<TierManager> m;
  Gate gate(3 * kMiB);  // after the manager: opened before the manager waits for the growth
  TierManagerOptions o = testing::ManagerOptions(kCapacity / testing::kTestSlot, "", 0);
  o.t1.dma_chunk_bytes = 4 * kMiB;
  o.t1.first_ready_bytes = 1 * kMiB;
  o.t1.before_touch_for_test = gate.Hook();
  absl::StatusOr<std::unique_ptr<TierManager>> created = TierManager::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  m = std::move(*created);
  EXPECT_LT(m->t1().ready_slots(), m->t1().capacity_slots());
  for (uint64_t i = 0; i < 10; ++i) {
    ASSERT_EQ(*testing::Put(*m, i), CommitOutcome::kStored) << i;
  }
  for (uint64_t i = 0; i < 10; ++i) EXPECT_TRUE(testing::GetAndVerify(*m, i).ok()) << i;
  EXPECT_LT(m->t1().ready_slots(), m->t1().capacity_slots());
  gate.Open();
  EXPECT_TRUE(m->t1().dma().Wait().ok());
  EXPECT_EQ(m->t1().Stats().ready_slots, m->t1().capacity_slots());
}

// With T2, the manager is up while T1 is still held: T2's io_uring registered only T1's ready part
// as fixed buffers (not all of it, which would fault in and pin the whole segment first), blocks
// go down to T2 and come back, and T2 registers the rest as T1 grows.
TEST(HostTierGrowthTest, TierManagerWithT2ServesBeforeT1IsReadyAndRegistersT2BuffersAsItGrows) {
  testing::TempDir tmp;
  std::unique_ptr<TierManager> m;
  Gate gate(3 * kMiB);
  TierManagerOptions o = testing::ManagerOptions(kCapacity / testing::kTestSlot, tmp.path(), 64);
  o.t1.dma_chunk_bytes = 4 * kMiB;
  o.t1.first_ready_bytes = 1 * kMiB;
  o.t1.before_touch_for_test = gate.Hook();
  absl::StatusOr<std::unique_ptr<TierManager>> created = TierManager::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  m = std::move(*created);
  ASSERT_NE(m->t2(), nullptr);
  T2FixedBuffers fixed = m->t2()->fixed_buffers();
  if (!fixed.sparse) GTEST_SKIP() << "no sparse io_uring buffer tables (Linux < 5.19)";
  EXPECT_EQ(fixed.bytes, kCapacity);
  EXPECT_GT(fixed.registered_bytes, 0u);
  EXPECT_LE(fixed.registered_bytes, 3 * kMiB);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(*testing::Put(*m, i), CommitOutcome::kStored) << i;
  EXPECT_TRUE(m->FlushT1(std::chrono::steady_clock::now() + std::chrono::seconds(20)));
  for (uint64_t i = 0; i < 10; ++i) EXPECT_TRUE(testing::InTier(*m, i, Tier::kT2)) << i;
  for (uint64_t i = 0; i < 10; ++i) EXPECT_TRUE(testing::GetAndVerify(*m, i).ok()) << i;
  EXPECT_LT(m->t1().ready_slots(), m->t1().capacity_slots());
  gate.Open();
  EXPECT_TRUE(m->t1().dma().Wait().ok());
  EXPECT_EQ(m->t2()->fixed_buffers().registered_bytes, kCapacity);
}

}  // namespace
}  // namespace kvtier
