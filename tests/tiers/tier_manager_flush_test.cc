// The tier manager writing T1 out to T2: FlushT1 (a clean stop's flush, issue 11) and what a
// demotion puts on disk past the payload. Real T1, real T2 files, io_uring and RocksDB.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "tests/tiers/tier_manager_test_util.h"
#include "tiers/tier_manager.h"

namespace kvtier {
namespace {

using testing::GetAndVerify;
using testing::GetSync;
using testing::InTier;
using testing::KeyOf;
using testing::ManagerOptions;
using testing::Put;
using testing::SizeOf;
using testing::TempDir;

std::unique_ptr<TierManager> Make(const TierManagerOptions& options) {
  auto m = TierManager::Create(options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

std::chrono::steady_clock::time_point In(int seconds) {
  return std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
}

// Puts `bytes` of `fill` under `key` into a fresh T1 slot; the slot.
SlotId PutBytes(TierManager& m, const BlockKey& key, uint8_t fill, uint32_t bytes) {
  absl::StatusOr<SlotId> slot = m.AllocateForPut();
  EXPECT_TRUE(slot.ok()) << slot.status();
  if (!slot.ok()) return kNoSlot;
  std::memset(m.t1().SlotData(*slot), fill, bytes);
  const PutCommit put{key, /*namespace_id=*/3, bytes, XXH3_64bits(m.t1().SlotData(*slot), bytes)};
  EXPECT_EQ(*m.CommitPut(put, *slot), CommitOutcome::kStored);
  return *slot;
}

// O_DIRECT writes whole 4 KiB blocks: the bytes between a payload's end and the next 4 KiB
// boundary reach the disk. They used to be whatever the T1 slot held before (here: another
// block's, as it could be another namespace's); they must be zeros.
TEST(TierManagerFlushTest, DemotionWritesZerosPastThePayloadToThe4KiBBoundary) {
  TempDir tmp;
  auto m = Make(ManagerOptions(1, tmp.path(), 8));  // one T1 slot: the second block reuses it
  ASSERT_NE(m, nullptr);
  const SlotId first = PutBytes(*m, KeyOf(1), 0xAB, testing::kTestSlot);
  ASSERT_TRUE(m->Drop(KeyOf(1)).ok());
  constexpr uint32_t kPayload = 5000;  // 3192 bytes short of 8 KiB
  ASSERT_EQ(PutBytes(*m, KeyOf(2), 0x11, kPayload), first);
  ASSERT_TRUE(m->FlushT1(In(60)));
  ASSERT_TRUE(InTier(*m, 2, Tier::kT2));
  const SlotId t2_slot = m->index().Find(KeyOf(2))->slots[static_cast<int>(Tier::kT2)];
  const auto [path, offset] = m->t2()->SlotLocation(t2_slot);
  m.reset();  // closed: everything is on disk

  std::vector<uint8_t> raw(8192);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, raw.data(), raw.size(), static_cast<off_t>(offset)), 8192);
  ::close(fd);
  for (uint32_t i = 0; i < kPayload; ++i) ASSERT_EQ(raw[i], 0x11) << "payload byte " << i;
  for (uint32_t i = kPayload; i < raw.size(); ++i) ASSERT_EQ(raw[i], 0) << "padding byte " << i;
}

// FlushT1 writes every block that is only in T1 to T2, through demotion's own path; a leased
// block stays (and is not written); reopening the T2 directory finds the written ones.
TEST(TierManagerFlushTest, FlushWritesEveryT1OnlyBlockToT2AndARestartFindsThem) {
  TempDir tmp;
  const TierManagerOptions options = ManagerOptions(16, tmp.path(), 64);
  auto m = Make(options);
  ASSERT_NE(m, nullptr);
  constexpr uint64_t kBlocks = 10;
  for (uint64_t i = 0; i < kBlocks; ++i) ASSERT_EQ(*Put(*m, i), CommitOutcome::kStored);
  m->Quiesce();
  EXPECT_EQ(m->Stats().tier(Tier::kT1).moved_down,
            0u);                            // below the watermark: all of them in T1 only
  ASSERT_TRUE(GetSync(*m, KeyOf(0)).ok());  // leased: it must stay
  ASSERT_TRUE(m->FlushT1(In(60)));
  const TierManagerStats s = m->Stats();
  EXPECT_EQ(s.tier(Tier::kT1).moved_down, kBlocks - 1);
  EXPECT_EQ(
      s.tier(Tier::kT1).move_down_failures + s.tier(Tier::kT1).rejected + s.tier(Tier::kT1).dropped,
      0u);
  EXPECT_EQ(m->t1().Stats().used_slots, 1u);
  EXPECT_TRUE(InTier(*m, 0, Tier::kT1));
  ASSERT_TRUE(m->Release(KeyOf(0)).ok());
  // T1 sheds by its watermarks again: a put stays in T1.
  ASSERT_EQ(*Put(*m, 100), CommitOutcome::kStored);
  m->Quiesce();
  EXPECT_FALSE(InTier(*m, 100, Tier::kT2));
  m.reset();

  m = Make(options);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->Stats().recovered_blocks, kBlocks - 1);
  for (uint64_t i = 1; i < kBlocks; ++i) EXPECT_TRUE(GetAndVerify(*m, i).ok()) << i;
  EXPECT_EQ(GetSync(*m, KeyOf(0)).status().code(), absl::StatusCode::kNotFound);
}

// Blocks already in T2 just leave T1; a deadline that has passed ends the flush at once.
TEST(TierManagerFlushTest, CleanBlocksCostNoWriteAndAPassedDeadlineReturnsFalse) {
  TempDir tmp;
  auto m = Make(ManagerOptions(16, tmp.path(), 64));
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(*Put(*m, i), CommitOutcome::kStored);
  ASSERT_TRUE(m->FlushT1(In(60)));
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(GetAndVerify(*m, i).ok());  // promoted back: clean
  const uint64_t writes = m->t2()->Stats().writes;
  for (uint64_t i = 4; i < 8; ++i) ASSERT_EQ(*Put(*m, i), CommitOutcome::kStored);
  EXPECT_FALSE(m->FlushT1(std::chrono::steady_clock::now()));
  ASSERT_TRUE(m->FlushT1(In(60)));
  EXPECT_EQ(m->t2()->Stats().writes, writes + 4);  // only the four new blocks were written
  EXPECT_EQ(m->t1().Stats().used_slots, 0u);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_TRUE(GetAndVerify(*m, i).ok()) << i << " " << SizeOf(i);
}

}  // namespace
}  // namespace kvtier
