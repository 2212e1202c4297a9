// T2 NVMe tier: round trips, concurrency, capacity and warm restart, on real files with real
// io_uring and RocksDB (issue 3, "Tests").
#include "tiers/nvme_tier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "tests/tiers/nvme_test_util.h"

namespace kvtier {
namespace {

using testing::Aligned;
using testing::FillPayload;
using testing::ReadSync;
using testing::RecordOf;
using testing::SmallOptions;
using testing::TempDir;
using testing::WriteSync;

constexpr uint32_t kSlot = 2u << 20;

// The fast (AVX2 where available) checksum is the library's XXH3-64, byte for byte: records
// written by one build verify under another.
TEST(NvmeTierTest, PayloadChecksumIsTheLibrarysXxh3AtEverySize) {
  auto buf = Aligned(1 << 20);
  FillPayload(42, buf.get(), 1 << 20);
  for (size_t bytes : {0, 1, 3, 16, 17, 128, 129, 240, 241, 1023, 1024, 4096, 65537, 1 << 20}) {
    EXPECT_EQ(PayloadChecksum(buf.get(), bytes), XXH3_64bits(buf.get(), bytes)) << bytes;
    EXPECT_EQ(PayloadChecksum(buf.get() + 1, bytes - (bytes > 0)),
              XXH3_64bits(buf.get() + 1, bytes - (bytes > 0)))
        << bytes << " misaligned";
  }
}

TEST(NvmeTierTest, RoundTripsRandomPayloadsAtSeveralSizesThroughRegisteredMemory) {
  TempDir tmp;
  // Two directories (as if two devices) and a "T1 segment" registered as fixed buffers.
  NvmeTierOptions o = SmallOptions(tmp.Sub("a"), kSlot, 8);
  o.directories.push_back(tmp.Sub("b"));
  o.durability = T2Durability::kFdatasync;
  const std::vector<uint32_t> sizes = {4096, 4097, 65536, 256 << 10, (1 << 20) + 12345, kSlot};
  auto segment = Aligned(2 * kSlot * sizes.size());
  o.registered_ranges = {{segment.get(), 2 * kSlot * sizes.size()}};
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  for (size_t i = 0; i < sizes.size(); ++i) {
    uint8_t* src = segment.get() + 2 * i * kSlot;
    uint8_t* dst = src + kSlot;
    FillPayload(i, src, sizes[i]);
    auto slot = (*tier)->Allocate();
    ASSERT_TRUE(slot.ok()) << slot.status();
    ASSERT_TRUE(WriteSync(**tier, *slot, RecordOf(i, src, sizes[i]), src).ok());
    std::memset(dst, 0xee, kSlot);
    ASSERT_TRUE(ReadSync(**tier, *slot, dst).ok()) << "size " << sizes[i];
    EXPECT_EQ(std::memcmp(src, dst, sizes[i]), 0) << "size " << sizes[i];
  }
  const TierStats st = (*tier)->Stats();
  EXPECT_EQ(st.writes, sizes.size());
  EXPECT_EQ(st.reads, sizes.size());
  EXPECT_EQ(st.used_slots, sizes.size());
  EXPECT_EQ(st.capacity_slots, 16u);
}

TEST(NvmeTierTest, RoundTripsOutsideRegisteredMemoryAsPlainDirectIo) {
  TempDir tmp;
  auto tier = NvmeTier::Open(SmallOptions(tmp.path(), 65536, 4), nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  auto src = Aligned(65536), dst = Aligned(65536);
  FillPayload(1, src.get(), 50000);
  const SlotId slot = *(*tier)->Allocate();
  ASSERT_TRUE(WriteSync(**tier, slot, RecordOf(1, src.get(), 50000), src.get()).ok());
  ASSERT_TRUE(ReadSync(**tier, slot, dst.get()).ok());
  EXPECT_EQ(std::memcmp(src.get(), dst.get(), 50000), 0);
}

TEST(NvmeTierTest, MisalignedOrOversizedTransfersAreInvalidArgument) {
  TempDir tmp;
  auto tier = NvmeTier::Open(SmallOptions(tmp.path(), 8192, 4), nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  auto buf = Aligned(3 * 8192);
  const SlotId slot = *(*tier)->Allocate();
  EXPECT_EQ(WriteSync(**tier, slot, RecordOf(1, buf.get(), 100), buf.get() + 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSync(**tier, slot, RecordOf(1, buf.get(), 8193), buf.get()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadSync(**tier, slot, buf.get()).code(), absl::StatusCode::kNotFound);
}

TEST(NvmeTierTest, FullTierAnswersResourceExhaustedAndFreedSlotsComeBack) {
  TempDir tmp;
  auto tier = NvmeTier::Open(SmallOptions(tmp.path(), 4096, 3), nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  std::vector<SlotId> slots;
  for (int i = 0; i < 3; ++i) slots.push_back(*(*tier)->Allocate());
  EXPECT_EQ((*tier)->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*tier)->Stats().rejected_allocations, 1u);
  (*tier)->Free(slots[1]);
  auto again = (*tier)->Allocate();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, slots[1]);
}

// Several writer threads and reader threads at once; every read of a committed block is correct.
TEST(NvmeTierTest, ConcurrentReadersAndWritersSeeOnlyCommittedData) {
  TempDir tmp;
  // Payloads of 4 KiB to 256 KiB: both inline (<= 64 KiB) and verify-pool reads.
  constexpr uint32_t kBytes = 256 << 10, kPerThread = 48, kThreads = 4;
  NvmeTierOptions o = SmallOptions(tmp.Sub("a"), kBytes, kThreads * kPerThread / 2);
  o.directories.push_back(tmp.Sub("b"));
  o.queue_depth = 8;  // small, so the overflow queue is exercised
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto src = Aligned(kBytes), dst = Aligned(kBytes);
      std::vector<std::pair<SlotId, uint64_t>> mine;
      for (uint32_t k = 0; k < kPerThread; ++k) {
        const uint64_t id = t * 1000 + k;
        const uint32_t bytes =
            4096 + static_cast<uint32_t>(testing::SplitMix(id) % (kBytes - 4096));
        FillPayload(id, src.get(), bytes);
        auto slot = (*tier)->Allocate();
        if (!slot.ok() ||
            !WriteSync(**tier, *slot, RecordOf(id, src.get(), bytes), src.get()).ok()) {
          ++failures;
          continue;
        }
        mine.emplace_back(*slot, id);
        // Read back an earlier block of this thread while others write.
        const auto& [rslot, rid] = mine[testing::SplitMix(k) % mine.size()];
        const uint32_t rbytes =
            4096 + static_cast<uint32_t>(testing::SplitMix(rid) % (kBytes - 4096));
        FillPayload(rid, src.get(), rbytes);
        if (!ReadSync(**tier, rslot, dst.get()).ok() ||
            std::memcmp(src.get(), dst.get(), rbytes) != 0) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ((*tier)->Stats().writes, kThreads * kPerThread);
}

TEST(NvmeTierTest, WarmRestartRecoversStoredBlocksAndNotFreedOnes) {
  TempDir tmp;
  const NvmeTierOptions o = SmallOptions(tmp.path(), 8192, 16);
  auto buf = Aligned(8192);
  std::map<SlotId, uint64_t> kept;
  {
    auto tier = NvmeTier::Open(o, nullptr);
    ASSERT_TRUE(tier.ok()) << tier.status();
    for (uint64_t i = 0; i < 10; ++i) {
      FillPayload(i, buf.get(), 8000);
      const SlotId slot = *(*tier)->Allocate();
      ASSERT_TRUE(WriteSync(**tier, slot, RecordOf(i, buf.get(), 8000), buf.get()).ok());
      if (i % 3 == 0) {
        (*tier)->Free(slot);
      } else {
        kept[slot] = i;
      }
    }
    (*tier)->Allocate().IgnoreError();  // allocated but never written: not recovered
  }
  std::map<SlotId, uint64_t> seen;
  auto tier = NvmeTier::Open(o, [&](const BlockRecord& r, SlotId slot) { seen[slot] = r.key.lo; });
  ASSERT_TRUE(tier.ok()) << tier.status();
  EXPECT_EQ(seen, kept);
  EXPECT_EQ((*tier)->Stats().used_slots, kept.size());
  auto dst = Aligned(8192);
  for (const auto& [slot, id] : kept) {
    FillPayload(id, buf.get(), 8000);
    ASSERT_TRUE(ReadSync(**tier, slot, dst.get()).ok());
    EXPECT_EQ(std::memcmp(buf.get(), dst.get(), 8000), 0);
  }
  // Recovered slots are taken; the rest are free.
  for (size_t i = 0; i < 16 - kept.size(); ++i) EXPECT_TRUE((*tier)->Allocate().ok());
  EXPECT_FALSE((*tier)->Allocate().ok());
}

TEST(NvmeTierTest, RestartWithAnotherSlotSizeIsRejectedNamingTheSetting) {
  TempDir tmp;
  ASSERT_TRUE(NvmeTier::Open(SmallOptions(tmp.path(), 8192, 16), nullptr).ok());
  auto tier = NvmeTier::Open(SmallOptions(tmp.path(), 4096, 32), nullptr);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(tier.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tier.status().message().find("t2.slot_bytes"), absl::string_view::npos)
      << tier.status();
}

}  // namespace
}  // namespace kvtier
