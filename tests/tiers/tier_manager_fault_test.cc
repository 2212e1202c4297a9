// The tier manager when things go wrong or run at once: a corrupt T2 copy, a T1 payload changed
// after commit, a restart, and many threads putting and getting (also run under ThreadSanitizer).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <thread>
#include <vector>

#include "tests/tiers/tier_manager_test_util.h"
#include "tiers/slot_file.h"
#include "tiers/tier_manager.h"

namespace kvtier {
namespace {

using testing::GetAndVerify;
using testing::GetSync;
using testing::InTier;
using testing::KeyOf;
using testing::ManagerOptions;
using testing::Put;
using testing::TempDir;

// Flips one byte of every slot in the T2 slot file of `dir`.
void CorruptEverySlot(const std::string& dir, uint32_t slots) {
  const std::string path = dir + "/" + SlotFile::kFileName;
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  for (uint32_t s = 0; s < slots; ++s) {
    const off_t off = off_t{s} * testing::kTestSlot;
    uint8_t byte = 0;
    if (::pread(fd, &byte, 1, off) != 1) continue;  // past the end of a sparse file
    byte ^= 0xff;
    ASSERT_EQ(::pwrite(fd, &byte, 1, off), 1);
  }
  ::fsync(fd);
  ::close(fd);
}

TEST(TierManagerFaultTest, ACorruptT2CopyIsAMissNeverWrongData) {
  TempDir tmp;
  auto m = TierManager::Create(ManagerOptions(4, tmp.path(), 64));
  ASSERT_TRUE(m.ok()) << m.status();
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(Put(**m, i).ok());
  (*m)->Quiesce();
  ASSERT_TRUE(InTier(**m, 0, Tier::kT2) && !InTier(**m, 0, Tier::kT1));
  CorruptEverySlot(tmp.path(), 64);
  EXPECT_EQ(GetSync(**m, KeyOf(0)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE((*m)->index().Find(KeyOf(0)).has_value());  // dropped with its last lease
  EXPECT_EQ(GetSync(**m, KeyOf(0)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*m)->Stats().tier(Tier::kT1).promotion_failures, 1u);
  EXPECT_EQ((*m)->t2()->Stats().checksum_failures, 1u);
  for (uint64_t i = 0; i < 20; ++i) {
    const absl::Status st = GetAndVerify(**m, i);
    EXPECT_TRUE(st.ok() || st.code() == absl::StatusCode::kDataLoss ||
                st.code() == absl::StatusCode::kNotFound)
        << i << ": " << st;
  }
}

TEST(TierManagerFaultTest, AT1PayloadChangedAfterCommitIsNeverPersisted) {
  TempDir tmp;
  auto m = TierManager::Create(ManagerOptions(4, tmp.path(), 64));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(Put(**m, 0).ok());
  const SlotId slot = (*m)->index().Find(KeyOf(0))->slots[1];
  reinterpret_cast<uint8_t*>((*m)->t1().SlotData(slot))[7] ^= 1;  // a client writes after commit
  for (uint64_t i = 1; i < 12; ++i) ASSERT_TRUE(Put(**m, i).ok());
  (*m)->Quiesce();
  EXPECT_EQ((*m)->Stats().integrity_drops, 1u);
  EXPECT_FALSE((*m)->index().Find(KeyOf(0)).has_value());
  EXPECT_TRUE(GetAndVerify(**m, 1).ok());
}

TEST(TierManagerFaultTest, ARestartServesTheBlocksT2Held) {
  TempDir tmp;
  uint64_t in_t2 = 0;
  {
    auto m = TierManager::Create(ManagerOptions(8, tmp.path(), 256));
    ASSERT_TRUE(m.ok()) << m.status();
    for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(Put(**m, i).ok());
    (*m)->Quiesce();
    in_t2 = (*m)->t2()->Stats().used_slots;
    ASSERT_GT(in_t2, 80u);
  }
  auto m = TierManager::Create(ManagerOptions(8, tmp.path(), 256));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->Stats().recovered_blocks, in_t2);
  EXPECT_EQ((*m)->index().Size(), in_t2);
  uint64_t served = 0;
  for (uint64_t i = 0; i < 100; ++i) {
    const absl::Status st = GetAndVerify(**m, i);
    if (st.ok()) ++served;
    EXPECT_TRUE(st.ok() || st.code() == absl::StatusCode::kNotFound) << i << ": " << st;
  }
  EXPECT_EQ(served, in_t2);
}

// Four threads put overlapping ranges and get random blocks: every get that succeeds returns the
// right bytes, blocks stored twice are stored once, and nothing is lost while T2 has room.
TEST(TierManagerConcurrentTest, ConcurrentPutsAndGetsKeepEveryByte) {
  TempDir tmp;
  TierManagerOptions o = ManagerOptions(24, tmp.path(), 2048);
  o.t1_policy.high_watermark = 0.8;
  o.t1_policy.low_watermark = 0.5;
  auto m = TierManager::Create(o);
  ASSERT_TRUE(m.ok()) << m.status();
  constexpr uint64_t kPerThread = 150;
  constexpr int kThreads = 4;
  std::atomic<uint64_t> wrong{0}, missing{0}, dups{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      // Thread t puts blocks [t * kPerThread / 2, ...): neighbours overlap by half.
      const uint64_t first = t * kPerThread / 2;
      for (uint64_t i = first; i < first + kPerThread; ++i) {
        absl::StatusOr<CommitOutcome> r = Put(**m, i);
        if (r.ok() && *r == CommitOutcome::kAlreadyPresent) dups.fetch_add(1);
        const absl::Status st = GetAndVerify(**m, first + rng() % (i - first + 1));
        if (st.code() == absl::StatusCode::kDataLoss) wrong.fetch_add(1);
        if (st.code() == absl::StatusCode::kNotFound) missing.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  (*m)->Quiesce();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(missing.load(), 0u);
  EXPECT_GT(dups.load(), 0u);
  const uint64_t unique = (kThreads + 1) * kPerThread / 2;
  EXPECT_EQ((*m)->index().Size(), unique);
  EXPECT_EQ((*m)->Stats().puts_committed, unique);
  for (uint64_t i = 0; i < unique; ++i) EXPECT_TRUE(GetAndVerify(**m, i).ok()) << i;
}

}  // namespace
}  // namespace kvtier
