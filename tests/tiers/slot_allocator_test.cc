#include "tiers/slot_allocator.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace kvtier {
namespace {

TEST(SlotAllocatorTest, HandsOutEverySlotOnceThenReportsExhausted) {
  SlotAllocator alloc(64);
  std::set<SlotId> seen;
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<SlotId> slot = alloc.Allocate();
    ASSERT_TRUE(slot.ok()) << slot.status();
    EXPECT_LT(*slot, 64u);
    EXPECT_TRUE(seen.insert(*slot).second) << "slot " << *slot << " handed out twice";
  }
  EXPECT_EQ(alloc.used(), 64u);
  absl::StatusOr<SlotId> full = alloc.Allocate();
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(alloc.exhausted(), 1u);
}

TEST(SlotAllocatorTest, FreedSlotIsReusedFirst) {
  SlotAllocator alloc(4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(alloc.Allocate().ok());
  ASSERT_TRUE(alloc.Free(2).ok());
  EXPECT_FALSE(alloc.IsAllocated(2));
  absl::StatusOr<SlotId> again = alloc.Allocate();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 2u);
  EXPECT_TRUE(alloc.IsAllocated(2));
}

TEST(SlotAllocatorTest, DoubleFreeIsRefusedAndCounted) {
  SlotAllocator alloc(4);
  absl::StatusOr<SlotId> slot = alloc.Allocate();
  ASSERT_TRUE(slot.ok());
  ASSERT_TRUE(alloc.Free(*slot).ok());
  EXPECT_EQ(alloc.Free(*slot).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(alloc.Free(3).code(), absl::StatusCode::kFailedPrecondition);  // never allocated
  EXPECT_EQ(alloc.double_frees(), 2u);
  EXPECT_EQ(alloc.used(), 0u);
  // The free set is intact: exactly four slots come back, all distinct.
  std::set<SlotId> seen;
  for (int i = 0; i < 4; ++i) seen.insert(*alloc.Allocate());
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_FALSE(alloc.Allocate().ok());
}

TEST(SlotAllocatorTest, OutOfRangeFreeIsRefused) {
  SlotAllocator alloc(4);
  EXPECT_EQ(alloc.Free(4).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(alloc.Free(kNoSlot).code(), absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(alloc.IsAllocated(99));
}

TEST(SlotAllocatorTest, ZeroCapacityIsAlwaysFull) {
  SlotAllocator alloc(0);
  EXPECT_EQ(alloc.Allocate().status().code(), absl::StatusCode::kResourceExhausted);
}

// Threads allocate, hold and free concurrently; no slot may ever be held by two threads at once.
TEST(SlotAllocatorTest, ConcurrentAllocateFreeNeverSharesASlot) {
  constexpr uint32_t kSlots = 32;
  constexpr int kThreads = 4;
  SlotAllocator alloc(kSlots);
  std::vector<std::atomic<int>> owners(kSlots);
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        absl::StatusOr<SlotId> slot = alloc.Allocate();
        if (!slot.ok()) continue;
        if (owners[*slot].fetch_add(1) != 0) conflicts.fetch_add(1);
        owners[*slot].fetch_sub(1);
        if (!alloc.Free(*slot).ok()) conflicts.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(conflicts.load(), 0);
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.double_frees(), 0u);
}

TEST(SlotAllocatorTest, GrowsFromTheReadySlotsLowestFirstAndKeepsFreedOnes) {
  SlotAllocator a(10, 3);
  EXPECT_EQ(a.capacity(), 10u);
  EXPECT_EQ(a.ready(), 3u);
  for (SlotId want = 0; want < 3; ++want) EXPECT_EQ(*a.Allocate(), want);
  EXPECT_EQ(a.Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a.Free(5).code(), absl::StatusCode::kFailedPrecondition);  // not ready, not allocated
  ASSERT_TRUE(a.Free(1).ok());
  a.Grow(6);
  EXPECT_EQ(a.ready(), 6u);
  EXPECT_EQ(a.used(), 2u);
  for (SlotId want : {3u, 4u, 5u, 1u}) EXPECT_EQ(*a.Allocate(), want);
  a.Grow(4);  // not above ready(): nothing changes
  EXPECT_EQ(a.ready(), 6u);
  EXPECT_EQ(a.Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  a.Grow(99);  // clamped to the capacity
  EXPECT_EQ(a.ready(), 10u);
  for (SlotId want = 6; want < 10; ++want) EXPECT_EQ(*a.Allocate(), want);
  EXPECT_EQ(a.used(), 10u);
}

}  // namespace
}  // namespace kvtier
