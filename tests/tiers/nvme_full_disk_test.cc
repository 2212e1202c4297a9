// T2 on full disks (issue 11, "Configuration and disks"): a start that fails takes back what it
// created and nothing else, and admission comes back promptly once a full disk has room again,
// whether the slot file or RocksDB's log ran out. Real small ext4 file systems on loop devices
// (LoopFs; skipped with the reason where the machine cannot mount one), real io_uring and RocksDB.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "tests/tiers/nvme_test_util.h"
#include "tiers/nvme_tier.h"

namespace kvtier {
namespace {

using testing::Aligned;
using testing::FillPayload;
using testing::FillUp;
using testing::LoopFs;
using testing::ReadSync;
using testing::RecordOf;
using testing::SmallOptions;
using testing::SyncFs;
using testing::TempDir;
using testing::WriteBallast;
using testing::WriteSync;

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// Two directories on one 32 MiB file system, 20 MiB of preallocated slots each: the first file is
// made, the second cannot be. Both go again, and the metadata directory was never made; so a start
// asking for what fits is not refused for a leftover of another size.
TEST(NvmeFullDiskTest, AFailedStartRemovesTheFilesItCreated) {
  TempDir tmp;
  LoopFs fs(tmp.path(), 32);
  if (!fs.skip_reason().empty()) GTEST_SKIP() << fs.skip_reason();
  constexpr uint32_t kBytes = 1 << 20;
  NvmeTierOptions o = SmallOptions(fs.path() + "/a", kBytes, 20);
  o.directories.push_back(fs.path() + "/b");
  for (const std::string& d : o.directories) std::filesystem::create_directories(d);
  o.preallocate = true;
  auto refused = NvmeTier::Open(o, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("t2.directories[1]"), absl::string_view::npos)
      << refused.status();
  for (const std::string& d : o.directories) {
    EXPECT_FALSE(Exists(d + "/kvtier-t2.slots")) << d;
    EXPECT_FALSE(Exists(d + "/kvtier-t2-meta")) << d;
  }
  SyncFs(fs.path());
  o.capacity_bytes = 8 * kBytes;
  auto tier = NvmeTier::Open(o, nullptr);
  EXPECT_TRUE(tier.ok()) << tier.status();
}

// Files that were there before a failed start (they may hold blocks) are left as they were: a slot
// file of another size (the layout changed) and a slot file plus metadata of another slot size.
TEST(NvmeFullDiskTest, AFailedStartKeepsWhatWasThereBefore) {
  TempDir tmp;
  constexpr uint32_t kBytes = 16384;
  const NvmeTierOptions o = SmallOptions(tmp.path(), kBytes, 8);
  auto buf = Aligned(kBytes), dst = Aligned(kBytes);
  {
    auto tier = NvmeTier::Open(o, nullptr);
    ASSERT_TRUE(tier.ok()) << tier.status();
    FillPayload(1, buf.get(), 9000);
    const SlotId slot = *(*tier)->Allocate();
    ASSERT_TRUE(WriteSync(**tier, slot, RecordOf(1, buf.get(), 9000), buf.get()).ok());
  }
  const std::string slots = tmp.path() + "/kvtier-t2.slots";
  NvmeTierOptions bigger = o;
  bigger.capacity_bytes *= 2;
  EXPECT_EQ(NvmeTier::Open(bigger, nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  NvmeTierOptions other_slots = o;
  other_slots.slot_bytes = kBytes / 2;
  EXPECT_EQ(NvmeTier::Open(other_slots, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::filesystem::file_size(slots), uint64_t{8} * kBytes);
  uint32_t recovered = 0;
  auto tier = NvmeTier::Open(o, [&](const BlockRecord&, SlotId) { ++recovered; });
  ASSERT_TRUE(tier.ok()) << tier.status();
  ASSERT_EQ(recovered, 1u);
  ASSERT_TRUE(ReadSync(**tier, 0, dst.get()).ok());
  EXPECT_EQ(std::memcmp(buf.get(), dst.get(), 9000), 0);
}

// Polls Allocate (as the evictor does when it has victims) until admission is back; the seconds it
// took, or a negative number after `guard` seconds.
double SecondsUntilAdmitting(NvmeTier& tier, double guard) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    auto slot = tier.Allocate();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (slot.ok()) {
      tier.Free(*slot);
      return took.count();
    }
    if (took.count() > guard) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Writes blocks until one fails (the disk is full); how many were written.
uint64_t WriteUntilFull(NvmeTier& tier, uint32_t bytes, uint64_t most) {
  auto buf = Aligned(bytes);
  for (uint64_t i = 0; i < most; ++i) {
    auto slot = tier.Allocate();
    if (!slot.ok()) return i;
    FillPayload(i, buf.get(), bytes);
    if (!WriteSync(tier, *slot, RecordOf(i, buf.get(), bytes), buf.get()).ok()) return i;
  }
  return most;
}

// With the default probe interval, after room comes back admission resumes within a fraction of a
// second, both when the slot file ran out of room and when RocksDB's log did (that one took ~5 s:
// RocksDB's own recovery polled every 5 s and made the probe's Resume "Resource busy").
TEST(NvmeFullDiskTest, AdmissionResumesWellUnderASecondAfterRoomComesBack) {
  constexpr double kBound = 1.5;  // generous: the default probe interval is 0.2 s
  {
    TempDir tmp;
    LoopFs fs(tmp.path(), 32);
    if (!fs.skip_reason().empty()) GTEST_SKIP() << fs.skip_reason();
    WriteBallast(fs.path() + "/ballast", 4);
    NvmeTierOptions o = SmallOptions(fs.path(), 1 << 20, 64);  // 64 MiB of sparse slots
    o.admission_probe_interval_ms = NvmeTierOptions().admission_probe_interval_ms;
    auto tier = NvmeTier::Open(o, nullptr);
    ASSERT_TRUE(tier.ok()) << tier.status();
    EXPECT_LT(WriteUntilFull(**tier, 1 << 20, 64), 64u);
    ASSERT_FALSE((*tier)->Stats().admitting);
    ASSERT_EQ(std::remove((fs.path() + "/ballast").c_str()), 0);
    SyncFs(fs.path());
    const double took = SecondsUntilAdmitting(**tier, 60);
    std::printf("slot file: admission resumed %.3f s after room came back\n", took);
    EXPECT_GE(took, 0) << "admission never resumed";
    EXPECT_LT(took, kBound);
  }
  {
    TempDir tmp;
    LoopFs fs(tmp.path(), 48);
    if (!fs.skip_reason().empty()) GTEST_SKIP() << fs.skip_reason();
    NvmeTierOptions o = SmallOptions(tmp.Sub("slots"), 4096, 4096);
    o.metadata_directory = fs.path() + "/meta";
    o.admission_probe_interval_ms = NvmeTierOptions().admission_probe_interval_ms;
    auto tier = NvmeTier::Open(o, nullptr);
    ASSERT_TRUE(tier.ok()) << tier.status();
    FillUp(fs.path() + "/ballast");
    EXPECT_LT(WriteUntilFull(**tier, 4096, 4096), 4096u);
    ASSERT_FALSE((*tier)->Stats().admitting);
    ASSERT_EQ((*tier)->Stats().metadata_failures, 1u);
    ASSERT_EQ(std::remove((fs.path() + "/ballast").c_str()), 0);
    SyncFs(fs.path());
    const double took = SecondsUntilAdmitting(**tier, 60);
    std::printf("metadata: admission resumed %.3f s after room came back\n", took);
    EXPECT_GE(took, 0) << "admission never resumed";
    EXPECT_LT(took, kBound);
  }
}

}  // namespace
}  // namespace kvtier
