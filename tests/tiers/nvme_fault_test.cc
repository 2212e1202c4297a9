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

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/tiers/nvme_test_util.h"
#include "tiers/nvme_tier.h"

namespace kvtier {
namespace {

using testing::Aligned;
using testing::FillPayload;
using testing::ReadSync;
using testing::RecordOf;
using testing::SmallOptions;
using testing::TempDir;
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

// No loop device or size-limited mount is needed: RLIMIT_FSIZE makes writes past 1 MiB fail with
// EFBIG (SIGXFSZ ignored), which the tier must treat like ENOSPC.
TEST(NvmeFaultTest, WriteLimitStopsAdmissionWhileReadsGoOn) {
  TempDir tmp;
  constexpr uint32_t kBytes = 64 << 10;
  const NvmeTierOptions o = SmallOptions(tmp.path(), kBytes, 32);  // 2 MiB of slots
  ASSERT_TRUE(NvmeTier::Open(o, nullptr).ok());  // creates the files at full (sparse) size
  const int rc = InChild([&]() -> int {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 20, 1 << 20};
    CHILD_CHECK(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    auto tier = NvmeTier::Open(o, nullptr);
    CHILD_CHECK(tier.ok());
    auto buf = Aligned(kBytes);
    uint64_t written = 0;
    for (uint64_t i = 0; i < 32; ++i) {
      auto slot = (*tier)->Allocate();
      if (!slot.ok()) {
        CHILD_CHECK(slot.status().code() == absl::StatusCode::kUnavailable);
        break;
      }
      FillPayload(i, buf.get(), kBytes);
      if (!WriteSync(**tier, *slot, RecordOf(i, buf.get(), kBytes), buf.get()).ok()) break;
      ++written;
    }
    const TierStats st = (*tier)->Stats();
    CHILD_CHECK(written == 16);  // slots 0..15 lie below the 1 MiB limit
    CHILD_CHECK(!st.admitting && st.write_errors == 1);
    CHILD_CHECK((*tier)->Allocate().status().code() == absl::StatusCode::kUnavailable);
    auto dst = Aligned(kBytes);
    for (uint64_t i = 0; i < written; ++i) {
      FillPayload(i, buf.get(), kBytes);
      CHILD_CHECK(ReadSync(**tier, static_cast<SlotId>(i), dst.get()).ok());
      CHILD_CHECK(std::memcmp(buf.get(), dst.get(), kBytes) == 0);
    }
    return 0;
  });
  EXPECT_EQ(rc, 0) << "the child's stderr names the failed check";
}

// A fresh ext4 file system of `mib` MiB on a loop device, mounted at <dir>/mnt and unmounted (which
// frees the loop device: mount -o loop sets autoclear) at destruction. Needs root and loop devices;
// `skip_reason()` says why not when the machine does not allow it.
class LoopFs {
 public:
  LoopFs(const std::string& dir, int mib) : image_(dir + "/fs.img"), mount_(dir + "/mnt") {
    if (::geteuid() != 0) {
      skip_reason_ = "mounting a loop file system needs root";
      return;
    }
    std::filesystem::create_directories(mount_);
    const std::string cmd =
        fmt::format("truncate -s {}M {} && mkfs.ext4 -q -F {} && mount -o loop {} {}", mib, image_,
                    image_, image_, mount_);
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) {
      skip_reason_ = "could not make and mount a loop ext4 (" + cmd + ")";
      return;
    }
    mounted_ = true;
  }
  ~LoopFs() {
    if (!mounted_) return;
    // io_uring lets go of its files asynchronously after the ring closes: retry while busy.
    for (int i = 0; i < 100; ++i) {
      if (std::system(("umount " + mount_ + " >/dev/null 2>&1").c_str()) == 0) return;
      ::usleep(20000);
    }
    std::fprintf(stderr, "umount %s failed; unmount it by hand\n", mount_.c_str());
  }
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& path() const { return mount_; }

 private:
  std::string image_, mount_, skip_reason_;
  bool mounted_ = false;
};

// The real thing where the machine allows it: a 32 MiB file system under a tier that wants 64 MiB.
TEST(NvmeFaultTest, FullFileSystemStopsAdmissionWhileReadsGoOn) {
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
  std::filesystem::remove_all(o.directories[0]);
  const int mount_fd = ::open(fs.path().c_str(), O_RDONLY);
  ASSERT_EQ(::syncfs(mount_fd), 0);  // ext4 reuses freed blocks only after a journal commit
  ::close(mount_fd);

  // Sparse, the disk fills mid-run.
  o.directories = {fs.path()};
  o.preallocate = false;
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
  EXPECT_EQ((*tier)->Allocate().status().code(), absl::StatusCode::kUnavailable);
  for (uint64_t i = 0; i < written; ++i) {  // slots were handed out 0, 1, 2, ...
    ASSERT_TRUE(ReadSync(**tier, static_cast<SlotId>(i), dst.get()).ok()) << "block " << i;
    FillPayload(i, buf.get(), kBytes);
    EXPECT_EQ(std::memcmp(buf.get(), dst.get(), kBytes), 0) << "block " << i;
  }
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
