// T0 transfers under load and across processes: many threads moving payloads at once, errors
// delivered through `done` on the completion thread, in-flight copies finished by the destructor,
// and the pool read and written by a second process that opened the tier's IPC handle.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/kernels/gpu_test_util.h"
#include "tests/tiers/device_tier_test_util.h"
#include "tiers/device_tier.h"

extern char** environ;

namespace kvtier {
namespace {

using device_tier_test::Completions;
using device_tier_test::FillPattern;
using device_tier_test::FirstDifference;
using device_tier_test::HostBuffer;

constexpr uint32_t kSlot = 64 * 1024;
constexpr uint32_t kSlots = 256;
constexpr uint64_t kPool = uint64_t{kSlots} * kSlot;

std::unique_ptr<DeviceTier> MakeTier() {
  DeviceTierOptions o;
  o.capacity_bytes = kPool;
  o.slot_bytes = kSlot;
  absl::StatusOr<std::unique_ptr<DeviceTier>> tier = DeviceTier::Create(o);
  EXPECT_TRUE(tier.ok()) << tier.status();
  return tier.ok() ? std::move(*tier) : nullptr;
}

// One worker's rounds over its own slots [first, first + count): write a round's payloads, wait,
// read them back, wait, compare. Returns "" or what went wrong.
std::string WorkerRounds(DeviceTier& tier, HostBuffer& src, HostBuffer& dst, SlotId first,
                         uint32_t count, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    const uint64_t seed = 100 + round;
    Completions done;
    for (SlotId s = first; s < first + count; ++s) {
      FillPattern(src.data() + size_t{s} * kSlot, kSlot, seed, s);
      BlockRecord record;
      record.payload_bytes = kSlot;
      tier.Write(s, record, src.data() + size_t{s} * kSlot, done.Callback("write"));
    }
    if (!done.WaitFor(count)) return "writes did not complete: " + done.Describe();
    for (SlotId s = first; s < first + count; ++s) {
      tier.Read(s, dst.data() + size_t{s} * kSlot, done.Callback("read"));
    }
    if (!done.WaitFor(2 * count)) return "reads did not complete: " + done.Describe();
    if (!done.errors().empty()) return done.Describe();
    for (SlotId s = first; s < first + count; ++s) {
      std::string diff = FirstDifference(dst.data() + size_t{s} * kSlot, kSlot, seed, s);
      if (!diff.empty()) return fmt::format("round {}: {}", round, diff);
    }
  }
  return "";
}

TEST(DeviceTier, ManyThreadsMovingPayloadsAtOnceEachGetTheirOwnBytesBack) {
  KVTIER_REQUIRE_GPU();
  std::unique_ptr<DeviceTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  HostBuffer src(kPool), dst(kPool);
  KVTIER_ASSERT_OK(src.status());
  KVTIER_ASSERT_OK(dst.status());
  constexpr int kThreads = 8, kRounds = 4;
  constexpr uint32_t kPerThread = kSlots / kThreads;
  std::vector<std::string> results(kThreads);
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      results[t] = WorkerRounds(*tier, src, dst, t * kPerThread, kPerThread, kRounds);
    });
  }
  for (std::thread& w : workers) w.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(results[t], "") << "worker " << t;
  const TierStats s = tier->Stats();
  EXPECT_EQ(s.writes, uint64_t{kSlots} * kRounds);
  EXPECT_EQ(s.reads, uint64_t{kSlots} * kRounds);
  EXPECT_EQ(s.write_errors + s.read_errors, 0u);
}

TEST(DeviceTier, BadSlotOrSizeArrivesThroughDoneOnTheCompletionThread) {
  KVTIER_REQUIRE_GPU();
  std::unique_ptr<DeviceTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  HostBuffer buf(2 * kSlot);
  KVTIER_ASSERT_OK(buf.status());
  std::vector<absl::Status> got(3);
  Completions done;
  BlockRecord record;
  record.payload_bytes = kSlot;
  tier->Write(kSlots, record, buf.data(), [&](absl::Status s) { got[0] = s; });
  record.payload_bytes = kSlot + 1;
  tier->Write(0, record, buf.data(), [&](absl::Status s) { got[1] = s; });
  tier->Read(kSlots + 7, buf.data(), [&](absl::Status s) { got[2] = s; });
  // Callbacks run in submission order: once this one ran, the three above have.
  record.payload_bytes = kSlot;
  tier->Write(0, record, buf.data(), done.Callback("good write"));
  ASSERT_TRUE(done.WaitFor(1)) << done.Describe();
  EXPECT_TRUE(done.errors().empty()) << done.Describe();
  EXPECT_NE(done.threads()[0], std::this_thread::get_id()) << "done ran on the caller's thread";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].code(), absl::StatusCode::kInvalidArgument) << "call " << i << ": " << got[i];
    EXPECT_NE(got[i].message().find("t0"), std::string::npos) << got[i];
  }
  const TierStats s = tier->Stats();
  EXPECT_EQ(s.write_errors, 2u);
  EXPECT_EQ(s.read_errors, 1u);
  EXPECT_EQ(s.writes, 1u);
}

TEST(DeviceTier, DestructionFinishesInFlightCopiesAndRunsTheirCallbacks) {
  KVTIER_REQUIRE_GPU();
  HostBuffer src(kPool);
  KVTIER_ASSERT_OK(src.status());
  std::memset(src.data(), 0x5a, kPool);
  Completions done;
  {
    std::unique_ptr<DeviceTier> tier = MakeTier();
    ASSERT_NE(tier, nullptr);
    for (int pass = 0; pass < 4; ++pass) {
      for (SlotId s = 0; s < kSlots; ++s) {
        BlockRecord record;
        record.payload_bytes = kSlot;
        tier->Write(s, record, src.data() + size_t{s} * kSlot, done.Callback("write"));
      }
    }
  }  // destroyed with most of the 1024 copies still queued
  EXPECT_EQ(done.count(), 4u * kSlots);
  EXPECT_TRUE(done.errors().empty()) << done.Describe();
}

// --- Sharing the pool with another process ---

constexpr const char* kIpcEnv = "KVTIER_T0_IPC_CHILD";
constexpr SlotId kParentSlot = 7, kChildSlot = 8;
constexpr uint64_t kParentSeed = 41, kChildSeed = 42;

std::string Hex(const gpu::IpcHandle& h) {
  std::string out;
  for (uint8_t b : h.bytes) out += fmt::format("{:02x}", b);
  return out;
}

bool ParseHex(const std::string& text, gpu::IpcHandle* h) {
  if (text.size() != 2 * h->bytes.size()) return false;
  for (size_t i = 0; i < h->bytes.size(); ++i) {
    h->bytes[i] = static_cast<uint8_t>(std::stoul(text.substr(2 * i, 2), nullptr, 16));
  }
  return true;
}

// Runs this test binary again with only the child test below, the handle in its environment;
// returns its wait status.
int RunChild(const gpu::IpcHandle& handle) {
  char exe[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return -1;
  std::string filter = "--gtest_filter=DeviceTier.IpcChildSeesAndWritesTheParentsPool";
  std::vector<char*> argv = {exe, filter.data(), nullptr};
  std::string env_entry = std::string(kIpcEnv) + "=" + Hex(handle);
  std::vector<char*> envp = {env_entry.data()};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, kIpcEnv, std::strlen(kIpcEnv)) != 0) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, exe, nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

TEST(DeviceTier, PoolIsSharedWithAnotherProcessThroughItsIpcHandle) {
  KVTIER_REQUIRE_GPU();
  std::unique_ptr<DeviceTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  HostBuffer buf(kSlot);
  KVTIER_ASSERT_OK(buf.status());
  FillPattern(buf.data(), kSlot, kParentSeed, kParentSlot);
  Completions done;
  BlockRecord record;
  record.payload_bytes = kSlot;
  tier->Write(kParentSlot, record, buf.data(), done.Callback("parent write"));
  ASSERT_TRUE(done.WaitFor(1)) << done.Describe();
  ASSERT_TRUE(done.errors().empty()) << done.Describe();

  const int status = RunChild(tier->ipc_handle());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child process failed (its test output is above); wait status " << status;

  tier->Read(kChildSlot, buf.data(), done.Callback("parent read of the child's slot"));
  ASSERT_TRUE(done.WaitFor(2)) << done.Describe();
  ASSERT_TRUE(done.errors().empty()) << done.Describe();
  EXPECT_EQ(FirstDifference(buf.data(), kSlot, kChildSeed, kChildSlot), "")
      << "the child's write did not reach the parent's pool";
}

// The child half of the test above: runs only when started by it.
TEST(DeviceTier, IpcChildSeesAndWritesTheParentsPool) {
  const char* text = std::getenv(kIpcEnv);
  if (text == nullptr) GTEST_SKIP() << "runs as the child of PoolIsSharedWith...IpcHandle";
  gpu::IpcHandle handle;
  ASSERT_TRUE(ParseHex(text, &handle)) << kIpcEnv << " is not a hex IPC handle: " << text;
  KVTIER_ASSERT_OK(gpu::SetDevice(0));
  absl::StatusOr<void*> pool = gpu::OpenIpc(handle);
  KVTIER_ASSERT_OK(pool);
  auto* base = static_cast<std::byte*>(*pool);
  std::vector<std::byte> host(kSlot);
  absl::StatusOr<gpu::Stream> stream = gpu::Stream::Create();
  KVTIER_ASSERT_OK(stream);
  KVTIER_ASSERT_OK(
      gpu::CopyAsync(host.data(), base + size_t{kParentSlot} * kSlot, kSlot, stream->handle()));
  KVTIER_ASSERT_OK(stream->Synchronize());
  EXPECT_EQ(FirstDifference(host.data(), kSlot, kParentSeed, kParentSlot), "")
      << "the parent's slot, read through the IPC handle";
  FillPattern(host.data(), kSlot, kChildSeed, kChildSlot);
  KVTIER_ASSERT_OK(
      gpu::CopyAsync(base + size_t{kChildSlot} * kSlot, host.data(), kSlot, stream->handle()));
  KVTIER_ASSERT_OK(stream->Synchronize());
  KVTIER_ASSERT_OK(gpu::CloseIpc(*pool));
}

}  // namespace
}  // namespace kvtier
