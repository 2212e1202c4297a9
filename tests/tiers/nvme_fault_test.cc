// T2 NVMe tier under faults: corrupted slot bytes, a write limit (the disk-full path), and bad
// configuration (issue 3, "Tests"). Real files, real io_uring, real RocksDB.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

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

// Runs `body` in a forked child and returns its exit code (0 = every check passed; otherwise the
// source line of the first failed check). For limits and identities the test process must keep.
template <typename F>
int InChild(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}
#define CHILD_CHECK(cond)                                                           \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "child check failed at line %d: %s\n", __LINE__, #cond); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

TEST(NvmeFaultTest, FlippedBytesReadAsDataLossAreCountedAndTheRecordIsGone) {
  TempDir tmp;
  const NvmeTierOptions o = SmallOptions(tmp.path(), 16384, 8);
  auto buf = Aligned(16384), dst = Aligned(16384);
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  SlotId slots[2];
  for (uint64_t i = 0; i < 2; ++i) {
    FillPayload(i, buf.get(), 12000);
    slots[i] = *(*tier)->Allocate();
    ASSERT_TRUE(WriteSync(**tier, slots[i], RecordOf(i, buf.get(), 12000), buf.get()).ok());
  }
  const auto [path, offset] = (*tier)->SlotLocation(slots[0]);
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char junk[3] = {'\x5a', '\xa5', '\x00'};
  ASSERT_EQ(::pwrite(fd, junk, sizeof(junk), static_cast<off_t>(offset + 5000)), 3);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);

  EXPECT_EQ(ReadSync(**tier, slots[0], dst.get()).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ((*tier)->Stats().checksum_failures, 1u);
  EXPECT_EQ(ReadSync(**tier, slots[0], dst.get()).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(ReadSync(**tier, slots[1], dst.get()).ok());  // its neighbour is untouched
  FillPayload(1, buf.get(), 12000);
  EXPECT_EQ(std::memcmp(buf.get(), dst.get(), 12000), 0);
  tier->reset();
  std::vector<SlotId> recovered;
  tier = NvmeTier::Open(o, [&](const BlockRecord&, SlotId s) { recovered.push_back(s); });
  ASSERT_TRUE(tier.ok());
  EXPECT_EQ(recovered, std::vector<SlotId>{slots[1]});
}

// Overwrites 3 bytes of `slot`'s payload in the slot file, behind the tier's back.
void FlipBytes(const NvmeTier& tier, SlotId slot, uint64_t at) {
  const auto [path, offset] = tier.SlotLocation(slot);
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char junk[3] = {'\x5a', '\xa5', '\x00'};
  ASSERT_EQ(::pwrite(fd, junk, sizeof(junk), static_cast<off_t>(offset + at)), 3);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
}

// Payloads over 64 KiB are hashed on the verify pool, several at once: the contract is the same.
TEST(NvmeFaultTest, ConcurrentReadsOfLargeFlippedPayloadsAreDataLossFromTheVerifyPool) {
  TempDir tmp;
  constexpr uint32_t kBytes = 256 << 10, kPayload = 200000, kBlocks = 16, kThreads = 4;
  NvmeTierOptions o = SmallOptions(tmp.path(), kBytes, kBlocks);
  o.verify_threads = 3;
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  auto buf = Aligned(kBytes);
  for (uint64_t i = 0; i < kBlocks; ++i) {
    FillPayload(i, buf.get(), kPayload);
    ASSERT_EQ(*(*tier)->Allocate(), i);
    ASSERT_TRUE(
        WriteSync(**tier, static_cast<SlotId>(i), RecordOf(i, buf.get(), kPayload), buf.get())
            .ok());
  }
  const std::vector<SlotId> flipped = {3, 7, 11};
  for (SlotId s : flipped) FlipBytes(**tier, s, 150000 + s);
  std::vector<absl::StatusCode> codes(kBlocks);
  std::vector<int> intact(kBlocks, 0);
  std::vector<std::thread> readers;
  for (uint32_t t = 0; t < kThreads; ++t) {
    readers.emplace_back([&, t] {
      auto want = Aligned(kBytes), dst = Aligned(kBytes);
      for (uint32_t i = t; i < kBlocks; i += kThreads) {
        codes[i] = ReadSync(**tier, i, dst.get()).code();
        FillPayload(i, want.get(), kPayload);
        intact[i] = std::memcmp(want.get(), dst.get(), kPayload) == 0;
      }
    });
  }
  for (std::thread& r : readers) r.join();
  for (SlotId i = 0; i < kBlocks; ++i) {
    const bool bad = std::find(flipped.begin(), flipped.end(), i) != flipped.end();
    EXPECT_EQ(codes[i], bad ? absl::StatusCode::kDataLoss : absl::StatusCode::kOk) << "slot " << i;
    if (!bad) {
      EXPECT_TRUE(intact[i]) << "slot " << i;
    }
  }
  const TierStats st = (*tier)->Stats();
  EXPECT_EQ(st.checksum_failures, flipped.size());
  EXPECT_EQ(st.reads, kBlocks - flipped.size());
  for (SlotId s : flipped)
    EXPECT_EQ(ReadSync(**tier, s, buf.get()).code(), absl::StatusCode::kNotFound);
}

// A read that comes back short (the slot file lost its tail) is an I/O error: counted, the slot
// retired (never handed out again after its Free), and the stats say so.
TEST(NvmeFaultTest, ShortReadRetiresTheSlotAndTheStatsSaySo) {
  TempDir tmp;
  constexpr uint32_t kBytes = 16384, kSlots = 8;
  const NvmeTierOptions o = SmallOptions(tmp.path(), kBytes, kSlots);
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  auto buf = Aligned(kBytes);
  for (uint64_t i = 0; i < 2; ++i) {
    FillPayload(i, buf.get(), kBytes);
    ASSERT_EQ(*(*tier)->Allocate(), i);
    ASSERT_TRUE(
        WriteSync(**tier, static_cast<SlotId>(i), RecordOf(i, buf.get(), kBytes), buf.get()).ok());
  }
  const auto [path, offset] = (*tier)->SlotLocation(1);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(offset)), 0);  // slot 1 is past the end
  EXPECT_EQ(ReadSync(**tier, 1, buf.get()).code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(ReadSync(**tier, 0, buf.get()).ok());
  TierStats st = (*tier)->Stats();
  EXPECT_EQ(st.read_errors, 1u);
  EXPECT_EQ(st.retired_slots, 1u);
  EXPECT_EQ(st.metadata_failures, 0u);
  EXPECT_TRUE(st.admitting);
  (*tier)->Free(1);
  for (uint32_t n = 0; n < kSlots - 2; ++n) {
    auto slot = (*tier)->Allocate();
    ASSERT_TRUE(slot.ok()) << slot.status();
    EXPECT_NE(*slot, 1u);
  }
  EXPECT_EQ((*tier)->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
}

// No loop device or size-limited mount is needed: RLIMIT_FSIZE makes writes past 1 MiB fail with
// EFBIG (SIGXFSZ ignored), which the tier must treat like ENOSPC.
TEST(NvmeFaultTest, WriteLimitStopsAdmissionWhileReadsGoOn) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer cannot start threads in a child forked from a threaded process";
#endif
  TempDir tmp;
  constexpr uint32_t kBytes = 64 << 10;
  const NvmeTierOptions o = SmallOptions(tmp.path(), kBytes, 32);  // 2 MiB of slots
  ASSERT_TRUE(NvmeTier::Open(o, nullptr).ok());  // creates the files at full (sparse) size
  const int rc = InChild([&]() -> int {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 20, 1 << 20};
    CHILD_CHECK(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    auto opened = NvmeTier::Open(o, nullptr);
    CHILD_CHECK(opened.ok());
    // Never closed: closing flushes the metadata on RocksDB's background threads, and a child
    // forked from a process that already ran RocksDB has none (they stayed in the parent).
    NvmeTier* tier = opened->release();
    auto buf = Aligned(kBytes);
    uint64_t written = 0;
    for (uint64_t i = 0; i < 32; ++i) {
      auto slot = tier->Allocate();
      if (!slot.ok()) {
        CHILD_CHECK(slot.status().code() == absl::StatusCode::kUnavailable);
        break;
      }
      FillPayload(i, buf.get(), kBytes);
      if (!WriteSync(*tier, *slot, RecordOf(i, buf.get(), kBytes), buf.get()).ok()) break;
      ++written;
    }
    const TierStats st = tier->Stats();
    CHILD_CHECK(written == 16);  // slots 0..15 lie below the 1 MiB limit
    CHILD_CHECK(!st.admitting && st.write_errors == 1);
    CHILD_CHECK(st.admission_stops == 1 && st.retired_slots == 0 && st.metadata_failures == 0);
    CHILD_CHECK(tier->Allocate().status().code() == absl::StatusCode::kUnavailable);
    auto dst = Aligned(kBytes);
    for (uint64_t i = 0; i < written; ++i) {
      FillPayload(i, buf.get(), kBytes);
      CHILD_CHECK(ReadSync(*tier, static_cast<SlotId>(i), dst.get()).ok());
      CHILD_CHECK(std::memcmp(buf.get(), dst.get(), kBytes) == 0);
    }
    return 0;
  });
  EXPECT_EQ(rc, 0) << "the child's stderr names the failed check";
}

// A failed start leaves nothing behind: no slot file (not even a partly reserved one, which the
// next start would take for one of another size), no metadata directory.
void ExpectNothingLeftIn(const std::string& dir) {
  EXPECT_FALSE(std::filesystem::exists(dir + "/kvtier-t2.slots"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/kvtier-t2-meta"));
}

// The real thing where the machine allows it: a 32 MiB file system under a tier that wants 64 MiB.
// Once room comes back (here: another file is deleted), the probe finds it and admission resumes
// without a restart.
TEST(NvmeFaultTest, FullFileSystemStopsAdmissionWhileReadsGoOnAndResumesWhenRoomComesBack) {
  TempDir tmp;
  LoopFs fs(tmp.path(), 32);
  if (!fs.skip_reason().empty()) GTEST_SKIP() << fs.skip_reason();
  constexpr uint32_t kBytes = 1 << 20;
  // Preallocated, the shortage is a clear error at start.
  NvmeTierOptions o = SmallOptions(fs.path() + "/first", kBytes, 64);
  std::filesystem::create_directories(o.directories[0]);
  o.preallocate = true;
  auto refused = NvmeTier::Open(o, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("t2.capacity_bytes"), absl::string_view::npos)
      << refused.status();
  ExpectNothingLeftIn(o.directories[0]);  // the next start with a size that fits is not refused
  SyncFs(fs.path());
  o.capacity_bytes = 16 * kBytes;
  ASSERT_TRUE(NvmeTier::Open(o, nullptr).ok());
  std::filesystem::remove_all(o.directories[0]);
  SyncFs(fs.path());
  o.capacity_bytes = 64 * kBytes;

  // Sparse, the disk fills mid-run; 4 MiB of it are another file's.
  const std::string ballast = fs.path() + "/ballast";
  WriteBallast(ballast, 4);
  o.directories = {fs.path()};
  o.preallocate = false;
  o.admission_probe_interval_ms = 0;  // probe on every Allocate while stopped
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  auto buf = Aligned(kBytes), dst = Aligned(kBytes);
  uint64_t written = 0;
  for (uint64_t i = 0; i < 64; ++i) {
    auto slot = (*tier)->Allocate();
    if (!slot.ok()) break;
    FillPayload(i, buf.get(), kBytes);
    if (!WriteSync(**tier, *slot, RecordOf(i, buf.get(), kBytes), buf.get()).ok()) break;
    ++written;
  }
  EXPECT_GT(written, 4u);
  EXPECT_LT(written, 64u);
  EXPECT_FALSE((*tier)->Stats().admitting);
  // Still full: the probe fails and admission stays stopped.
  EXPECT_EQ((*tier)->Allocate().status().code(), absl::StatusCode::kUnavailable);
  TierStats st = (*tier)->Stats();
  EXPECT_EQ(st.admission_stops, 1u);
  EXPECT_EQ(st.admission_probes, 1u);
  EXPECT_EQ(st.admission_resumes, 0u);
  for (uint64_t i = 0; i < written; ++i) {  // slots were handed out 0, 1, 2, ...
    ASSERT_TRUE(ReadSync(**tier, static_cast<SlotId>(i), dst.get()).ok()) << "block " << i;
    FillPayload(i, buf.get(), kBytes);
    EXPECT_EQ(std::memcmp(buf.get(), dst.get(), kBytes), 0) << "block " << i;
  }

  ASSERT_EQ(::unlink(ballast.c_str()), 0);
  SyncFs(fs.path());
  auto slot = (*tier)->Allocate();
  ASSERT_TRUE(slot.ok()) << slot.status();
  st = (*tier)->Stats();
  EXPECT_TRUE(st.admitting);
  EXPECT_EQ(st.admission_probes, 2u);
  EXPECT_EQ(st.admission_resumes, 1u);
  FillPayload(100, buf.get(), kBytes);
  ASSERT_TRUE(WriteSync(**tier, *slot, RecordOf(100, buf.get(), kBytes), buf.get()).ok());
  ASSERT_TRUE(ReadSync(**tier, *slot, dst.get()).ok());
  EXPECT_EQ(std::memcmp(buf.get(), dst.get(), kBytes), 0);
}

// The metadata on its own small file system, filled up: the first record put that needs a new
// block fails, which stops admission and counts a metadata failure. RocksDB then refuses writes
// until it is resumed. Its own recovery is off (it polled every 5 s, and meanwhile answered the
// probe's Resume with "Resource busy"): the first probe after room came back resumes it.
TEST(NvmeFaultTest, FullMetadataFileSystemStopsAdmissionAndTheProbeResumesIt) {
  TempDir tmp;
  LoopFs fs(tmp.path(), 48);
  if (!fs.skip_reason().empty()) GTEST_SKIP() << fs.skip_reason();
  constexpr uint32_t kBytes = 4096, kSlots = 4096;
  NvmeTierOptions o = SmallOptions(tmp.Sub("slots"), kBytes, kSlots);
  o.metadata_directory = fs.path() + "/meta";
  o.admission_probe_interval_ms = 0;
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  const std::string ballast = fs.path() + "/ballast";
  FillUp(ballast);
  auto buf = Aligned(kBytes);
  uint64_t written = 0;
  absl::Status failed;
  for (uint64_t i = 0; i < kSlots && failed.ok(); ++i) {
    auto slot = (*tier)->Allocate();
    ASSERT_TRUE(slot.ok()) << slot.status();
    FillPayload(i, buf.get(), kBytes);
    failed = WriteSync(**tier, *slot, RecordOf(i, buf.get(), kBytes), buf.get());
    if (failed.ok()) ++written;
  }
  ASSERT_FALSE(failed.ok()) << "the metadata never ran out of room";
  TierStats st = (*tier)->Stats();
  EXPECT_EQ(st.metadata_failures, 1u);
  EXPECT_EQ(st.admission_stops, 1u);
  EXPECT_EQ(st.write_errors, 1u);
  EXPECT_FALSE(st.admitting);
  EXPECT_EQ((*tier)->Allocate().status().code(), absl::StatusCode::kUnavailable);  // still full

  ASSERT_EQ(::unlink(ballast.c_str()), 0);
  SyncFs(fs.path());
  auto slot = (*tier)->Allocate();
  ASSERT_TRUE(slot.ok()) << slot.status();
  st = (*tier)->Stats();
  EXPECT_EQ(st.admission_probes, 2u);
  EXPECT_EQ(st.admission_resumes, 1u);
  EXPECT_EQ(st.admission_stops, 1u);
  FillPayload(written, buf.get(), kBytes);
  ASSERT_TRUE(WriteSync(**tier, *slot, RecordOf(written, buf.get(), kBytes), buf.get()).ok());
  EXPECT_TRUE(ReadSync(**tier, *slot, buf.get()).ok());
}

void ExpectConfigError(const NvmeTierOptions& o, absl::StatusCode code,
                       const std::vector<std::string>& words) {
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(tier.status().code(), code) << tier.status();
  for (const std::string& w : words) {
    EXPECT_NE(tier.status().message().find(w), absl::string_view::npos)
        << "'" << w << "' missing from: " << tier.status();
  }
}

TEST(NvmeFaultTest, MissingDirectoryIsNamed) {
  TempDir tmp;
  NvmeTierOptions o = SmallOptions(tmp.Sub("a"), 4096, 4);
  o.directories.push_back(tmp.path() + "/missing");
  ExpectConfigError(o, absl::StatusCode::kNotFound,
                    {"t2.directories[1]", "/missing does not exist"});
}

TEST(NvmeFaultTest, DirectoryUnderARegularFileIsNamed) {
  TempDir tmp;
  std::ofstream(tmp.path() + "/file") << "x";
  ExpectConfigError(SmallOptions(tmp.path() + "/file/sub", 4096, 4),
                    absl::StatusCode::kInvalidArgument, {"t2.directories[0]", "Not a directory"});
}

TEST(NvmeFaultTest, CapacityNotAMultipleOfTheSlotSizeIsNamed) {
  TempDir tmp;
  NvmeTierOptions o = SmallOptions(tmp.path(), 4096, 4);
  o.capacity_bytes = 10000;
  ExpectConfigError(o, absl::StatusCode::kInvalidArgument,
                    {"t2.capacity_bytes: 10000", "multiple of t2.slot_bytes (4096)"});
  o = SmallOptions(tmp.path(), 4096, 4);
  o.slot_bytes = 5000;
  ExpectConfigError(o, absl::StatusCode::kInvalidArgument, {"t2.slot_bytes: 5000"});
  o = SmallOptions(tmp.path(), 4096, 4);
  o.queue_depth = 0;
  ExpectConfigError(o, absl::StatusCode::kInvalidArgument, {"t2.queue_depth"});
}

// Root ignores permission bits, so as root the check runs in a child that drops to nobody.
TEST(NvmeFaultTest, DirectoryWithoutPermissionIsNamed) {
  TempDir tmp;
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0755), 0);
  const std::string dir = tmp.Sub("locked");
  ASSERT_EQ(::chmod(dir.c_str(), 0), 0);
  constexpr int kCannotDropRoot = 77;
  const int rc = InChild([&]() -> int {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return kCannotDropRoot;
    auto tier = NvmeTier::Open(SmallOptions(dir, 4096, 4), nullptr);
    CHILD_CHECK(!tier.ok());
    CHILD_CHECK(tier.status().code() == absl::StatusCode::kPermissionDenied);
    CHILD_CHECK(tier.status().message().find("t2.directories[0]") != absl::string_view::npos);
    CHILD_CHECK(tier.status().message().find("permission denied") != absl::string_view::npos);
    return 0;
  });
  ::chmod(dir.c_str(), 0755);
  if (rc == kCannotDropRoot) GTEST_SKIP() << "running as root without the right to setuid(65534)";
  EXPECT_EQ(rc, 0) << "the child's stderr names the failed check";
}

}  // namespace
}  // namespace kvtier
