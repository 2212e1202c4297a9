// T2 NVMe tier: round trips, concurrency, capacity and warm restart, on real files with real
// io_uring and RocksDB (issue 3, "Tests"); and T2 over a T1 that is still growing, its fixed
// buffers registered as T1 becomes ready (issue 12, "T1 ready at once").
#include "tiers/nvme_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "tests/tiers/host_tier_test_util.h"
#include "tests/tiers/nvme_test_util.h"
#include "tiers/host_tier.h"
#include "tiers/nvme_ring.h"

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
  // Plain memory is ready at once: registered (by both rings) at Open, every transfer fixed.
  const T2FixedBuffers fixed = (*tier)->fixed_buffers();
  EXPECT_EQ(fixed.bytes, 2 * 2 * kSlot * sizes.size());
  EXPECT_EQ(fixed.registered_bytes, fixed.bytes);
  EXPECT_EQ(fixed.fixed_ops, 2 * sizes.size());
  EXPECT_EQ(fixed.plain_ops, 0u);
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

// T2 over a T1 that is still growing (issue 12): T1 of 16 MiB in chunks ending at 1, 3, 7, 11, 15
// and 16 MiB, held from 3 MiB on, so 3 MiB are ready while the tests run unless they open the gate.
constexpr uint64_t kMiB = 1 << 20;
constexpr uint32_t kT1Slot = 64 << 10;
constexpr uint64_t kT1Bytes = 16 * kMiB;
constexpr uint64_t kT1HeldFrom = 3 * kMiB;
constexpr SlotId kReadySlot = 1;    // at 64 KiB: in the ready part
constexpr SlotId kHeldSlot = 150;   // at 9.4 MiB: held (not faulted in, not registered)
constexpr SlotId kHeldSlot2 = 200;  // at 12.5 MiB: held
constexpr const char* kNoSparse =
    "this kernel has no sparse io_uring buffer tables (Linux < 5.19): T2 registers T1 at once when "
    "it is grown, which WithoutSparseTablesRegistersAllOnceT1IsReady covers";

std::unique_ptr<HostTier> HeldT1(testing::Gate& gate) {
  HostTierOptions o;
  o.capacity_bytes = kT1Bytes;
  o.slot_bytes = kT1Slot;
  o.touch_threads = 1;
  o.huge_pages = HugePages::kOff;
  o.dma_chunk_bytes = 4 * kMiB;
  o.first_ready_bytes = 1 * kMiB;
  o.before_touch_for_test = gate.Hook();
  absl::StatusOr<std::unique_ptr<HostTier>> t1 = HostTier::Create(o);
  EXPECT_TRUE(t1.ok()) << t1.status();
  if (!t1.ok()) return nullptr;
  testing::WaitForReadySlots(**t1, kT1HeldFrom / kT1Slot);
  return std::move(*t1);
}

// Writes block `id` to T2 from T1 slot `from`, reads it back into T1 slot `into`, compares.
void RoundTripThroughT1(NvmeTier& t2, HostTier& t1, uint64_t id, SlotId from, SlotId into) {
  auto* src = reinterpret_cast<uint8_t*>(t1.SlotData(from));
  auto* dst = reinterpret_cast<uint8_t*>(t1.SlotData(into));
  FillPayload(id, src, kT1Slot);
  absl::StatusOr<SlotId> slot = t2.Allocate();
  ASSERT_TRUE(slot.ok()) << slot.status();
  ASSERT_TRUE(WriteSync(t2, *slot, RecordOf(id, src, kT1Slot), src).ok()) << id;
  std::memset(dst, 0xee, kT1Slot);
  ASSERT_TRUE(ReadSync(t2, *slot, dst).ok()) << id;
  EXPECT_EQ(std::memcmp(src, dst, kT1Slot), 0) << id;
}

TEST(NvmeTierOverGrowingT1Test, TransfersWorkBeforeAndAfterT1IsReadyAndGoFixedAsItGrows) {
  TempDir tmp;
  testing::Gate gate(kT1HeldFrom);
  std::unique_ptr<HostTier> t1 = HeldT1(gate);
  ASSERT_NE(t1, nullptr);
  NvmeTierOptions o = SmallOptions(tmp.path(), kT1Slot, 16);
  o.registered_ranges = {{t1->base(), t1->size()}};
  absl::StatusOr<std::unique_ptr<NvmeTier>> t2 = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(t2.ok()) << t2.status();
  T2FixedBuffers fixed = (*t2)->fixed_buffers();
  if (!fixed.sparse) GTEST_SKIP() << kNoSparse;
  EXPECT_EQ(fixed.bytes, kT1Bytes);
  EXPECT_EQ(fixed.registered_bytes, kT1HeldFrom);  // only what T1 has ready: nothing pinned early

  // Before T1 is ready: from the ready part (fixed) into the held part (plain), and back.
  RoundTripThroughT1(**t2, *t1, 1, kReadySlot, kHeldSlot2);
  RoundTripThroughT1(**t2, *t1, 2, kHeldSlot, kReadySlot + 1);
  fixed = (*t2)->fixed_buffers();
  EXPECT_EQ(fixed.fixed_ops, 2u);
  EXPECT_EQ(fixed.plain_ops, 2u);
  EXPECT_EQ(t1->ready_slots(), kT1HeldFrom / kT1Slot);  // still held

  gate.Open();
  ASSERT_TRUE(t1->dma().Wait().ok());
  fixed = (*t2)->fixed_buffers();
  EXPECT_EQ(fixed.registered_bytes, kT1Bytes);
  // After: the same places, now every transfer fixed; blocks written before still read back.
  RoundTripThroughT1(**t2, *t1, 3, kReadySlot, kHeldSlot2);
  RoundTripThroughT1(**t2, *t1, 4, kHeldSlot, kReadySlot + 1);
  fixed = (*t2)->fixed_buffers();
  EXPECT_EQ(fixed.fixed_ops, 6u);
  EXPECT_EQ(fixed.plain_ops, 2u);
  auto dst = Aligned(kT1Slot), expected = Aligned(kT1Slot);
  for (SlotId s = 0; s < 2; ++s) {
    ASSERT_TRUE(ReadSync(**t2, s, dst.get()).ok()) << s;
    FillPayload(s + 1, expected.get(), kT1Slot);
    EXPECT_EQ(std::memcmp(dst.get(), expected.get(), kT1Slot), 0) << s;
  }
}

// A T2 closed while T1 still grows is told nothing more (ASan and TSan see a call into a closed
// ring here), and T1 finishes growing.
TEST(NvmeTierOverGrowingT1Test, ClosedWhileT1GrowsLeavesTheGrowthAlone) {
  TempDir tmp;
  testing::Gate gate(kT1HeldFrom);
  std::unique_ptr<HostTier> t1 = HeldT1(gate);
  ASSERT_NE(t1, nullptr);
  NvmeTierOptions o = SmallOptions(tmp.Sub("a"), kT1Slot, 16);
  o.directories.push_back(tmp.Sub("b"));
  o.registered_ranges = {{t1->base(), t1->size()}};
  {
    absl::StatusOr<std::unique_ptr<NvmeTier>> t2 = NvmeTier::Open(o, nullptr);
    ASSERT_TRUE(t2.ok()) << t2.status();
    if (!(*t2)->fixed_buffers().sparse) GTEST_SKIP() << kNoSparse;
    EXPECT_EQ((*t2)->fixed_buffers().registered_bytes, 2 * kT1HeldFrom);
    RoundTripThroughT1(**t2, *t1, 1, kReadySlot, kHeldSlot);
  }
  gate.Open();
  EXPECT_TRUE(t1->dma().Wait().ok());
  EXPECT_EQ(t1->ready_slots(), t1->capacity_slots());
}

// Several T2 writers and readers while T1 grows under them: every byte comes back.
TEST(NvmeTierOverGrowingT1Test, ConcurrentTransfersWhileT1Grows) {
  TempDir tmp;
  testing::Gate gate(kT1HeldFrom);
  std::unique_ptr<HostTier> t1 = HeldT1(gate);
  ASSERT_NE(t1, nullptr);
  NvmeTierOptions o = SmallOptions(tmp.path(), kT1Slot, 64);
  o.queue_depth = 4;
  o.registered_ranges = {{t1->base(), t1->size()}};
  absl::StatusOr<std::unique_ptr<NvmeTier>> t2 = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(t2.ok()) << t2.status();
  constexpr uint32_t kThreads = 4, kPerThread = 16;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t k = 0; k < kPerThread; ++k) {
        const uint64_t id = t * 100 + k;
        // Thread t's T1 slots: spread over the whole segment, ready and held chunks alike.
        const SlotId from = t * 64 + k * 2, into = from + 1;
        auto* src = reinterpret_cast<uint8_t*>(t1->SlotData(from));
        auto* dst = reinterpret_cast<uint8_t*>(t1->SlotData(into));
        FillPayload(id, src, kT1Slot);
        absl::StatusOr<SlotId> slot = (*t2)->Allocate();
        if (!slot.ok() || !WriteSync(**t2, *slot, RecordOf(id, src, kT1Slot), src).ok() ||
            !ReadSync(**t2, *slot, dst).ok() || std::memcmp(src, dst, kT1Slot) != 0) {
          ++failures;
        }
        if (slot.ok()) (*t2)->Free(*slot);
        if (t == 0 && k == kPerThread / 2) gate.Open();  // the rest grows meanwhile
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(t1->dma().Wait().ok());
  EXPECT_EQ((*t2)->fixed_buffers().registered_bytes, kT1Bytes);
}

// Reads or writes `len` bytes at `offset` through the ring; the CQE result.
int RingIo(NvmeRing& ring, bool write, void* buf, uint32_t len, uint64_t offset) {
  std::promise<int> result;
  RingOp op;
  op.write = write;
  op.buf = buf;
  op.len = len;
  op.offset = offset;
  op.done = [&result](int res) { result.set_value(res); };
  ring.Submit(std::move(op));
  return result.get_future().get();
}

// Where the kernel has no sparse buffer tables (before Linux 5.19; forced here), the ring registers
// every fixed buffer in one call once all of T1 is ready, and transfers are plain until then.
TEST(NvmeTierOverGrowingT1Test, WithoutSparseTablesRegistersAllOnceT1IsReady) {
  TempDir tmp;
  testing::Gate gate(kT1HeldFrom);
  std::unique_ptr<HostTier> t1 = HeldT1(gate);
  ASSERT_NE(t1, nullptr);
  const std::string path = tmp.path() + "/ring-file";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4 * kMiB), 0);
  {
    FixedBufferOptions f;
    f.ranges = {iovec{t1->base(), t1->size()}};
    f.align = kT1Slot;
    f.sparse = false;
    absl::StatusOr<std::unique_ptr<NvmeRing>> ring = NvmeRing::Create(fd, 4, f, nullptr, path);
    ASSERT_TRUE(ring.ok()) << ring.status();
    EXPECT_FALSE((*ring)->sparse());
    EXPECT_EQ((*ring)->registered_bytes(), 0u);
    auto check = [&](uint64_t id) {
      auto* src = reinterpret_cast<uint8_t*>(t1->SlotData(kReadySlot));
      auto* dst = reinterpret_cast<uint8_t*>(t1->SlotData(kHeldSlot));
      FillPayload(id, src, kT1Slot);
      std::memset(dst, 0, kT1Slot);
      EXPECT_EQ(RingIo(**ring, true, src, kT1Slot, id * kT1Slot), static_cast<int>(kT1Slot));
      EXPECT_EQ(RingIo(**ring, false, dst, kT1Slot, id * kT1Slot), static_cast<int>(kT1Slot));
      EXPECT_EQ(std::memcmp(src, dst, kT1Slot), 0) << id;
    };
    check(1);
    EXPECT_EQ((*ring)->plain_ops(), 2u);
    EXPECT_EQ((*ring)->fixed_ops(), 0u);
    gate.Open();
    ASSERT_TRUE(t1->dma().Wait().ok());
    EXPECT_EQ((*ring)->registered_bytes(), kT1Bytes);
    check(2);
    EXPECT_EQ((*ring)->fixed_ops(), 2u);
    EXPECT_EQ((*ring)->plain_ops(), 2u);
  }
  ::close(fd);
}

}  // namespace
}  // namespace kvtier
