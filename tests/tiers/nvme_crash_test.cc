// Crash safety of the T2 tier (DESIGN.md "Reliability rules": a daemon killed at any instant
// restarts with every block that was committed to T2 and durable). A forked child writes and frees
// blocks and reports each Write whose `done` returned OK and each Free that returned, over a pipe;
// the parent SIGKILLs it at a random moment, reopens the tier, and checks: every reported block
// that was not (being) freed is recovered and reads back correct; no freed block is visible; every
// visible block is one the child wrote and reads back correct (a commit may land just before the
// kill without being reported). Repeated over one directory, so each child also recovers the last
// one.
//
// The child re-executes this binary (fork + exec) rather than running in the forked copy: the
// parent already has RocksDB's background threads, which a fork would not carry over.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>

#include "tests/tiers/nvme_test_util.h"
#include "tiers/nvme_tier.h"

namespace kvtier {
namespace {

using testing::Aligned;
using testing::FillPayload;
using testing::ReadSync;
using testing::RecordOf;
using testing::TempDir;
using testing::WriteSync;

constexpr uint32_t kSlotBytes = 32 << 10;
constexpr uint32_t kSlots = 64;
constexpr int kRounds = 20;

struct Message {
  char type;  // 'R' ready, 'C' committed, 'P' about to free, 'F' freed
  uint64_t id;
} __attribute__((packed));

uint32_t PayloadBytes(uint64_t id) {
  return 1 + static_cast<uint32_t>(testing::SplitMix(id) % kSlotBytes);
}

NvmeTierOptions CrashOptions(const std::string& dir) {
  NvmeTierOptions o = testing::SmallOptions(dir, kSlotBytes, kSlots);
  o.durability = T2Durability::kFdatasync;
  o.queue_depth = 8;
  return o;
}

void Send(int fd, char type, uint64_t id) {
  const Message m{type, id};
  if (::write(fd, &m, sizeof(m)) != sizeof(m)) ::_exit(3);
}

// The child: recovers, then writes blocks round*1e6+k forever, freeing its oldest when full.
[[noreturn]] void RunChild(const std::string& dir, int round, int fd) {
  std::deque<std::pair<SlotId, uint64_t>> live;
  auto tier = NvmeTier::Open(
      CrashOptions(dir), [&](const BlockRecord& r, SlotId s) { live.emplace_back(s, r.key.lo); });
  if (!tier.ok()) ::_exit(2);
  Send(fd, 'R', 0);
  auto buf = Aligned(kSlotBytes);
  for (uint64_t k = 0;; ++k) {
    auto slot = (*tier)->Allocate();
    if (!slot.ok()) {
      Send(fd, 'P', live.front().second);  // from here the block may vanish
      (*tier)->Free(live.front().first);
      Send(fd, 'F', live.front().second);
      live.pop_front();
      continue;
    }
    const uint64_t id = static_cast<uint64_t>(round) * 1000000 + k;
    FillPayload(id, buf.get(), PayloadBytes(id));
    if (!WriteSync(**tier, *slot, RecordOf(id, buf.get(), PayloadBytes(id)), buf.get()).ok())
      ::_exit(4);
    Send(fd, 'C', id);
    live.emplace_back(*slot, id);
  }
}

constexpr char kChildEnv[] = "KVTIER_T2_CRASH_CHILD";  // "<round> <fd> <dir>"

// In the re-executed child, runs RunChild before main and never returns.
bool MaybeRunChild() {
  const char* spec = std::getenv(kChildEnv);
  if (spec == nullptr) return false;
  int round = 0, fd = -1, used = 0;
  if (std::sscanf(spec, "%d %d %n", &round, &fd, &used) != 2) ::_exit(5);
  RunChild(spec + used, round, fd);
}
const bool kIsChild = MaybeRunChild();

pid_t StartChild(const std::string& dir, int round, int fds[2]) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::close(fds[0]);
  const std::string spec = std::to_string(round) + " " + std::to_string(fds[1]) + " " + dir;
  ::setenv(kChildEnv, spec.c_str(), 1);
  char* argv[] = {const_cast<char*>("nvme_crash_test_child"), nullptr};
  ::execv("/proc/self/exe", argv);
  ::_exit(6);
}

// Reads the child's messages until `deadline` (then kills it) and drains the pipe to EOF.
void Supervise(pid_t pid, int fd, std::chrono::milliseconds run_for, std::set<uint64_t>& committed,
               std::set<uint64_t>& freed) {
  auto deadline = std::chrono::steady_clock::time_point::max();
  bool killed = false;
  for (;;) {
    if (!killed && std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, killed ? -1 : 2) == 0) continue;
    Message m;
    const ssize_t n = ::read(fd, &m, sizeof(m));
    if (n <= 0) break;  // EOF: the child is gone and its messages are all read
    ASSERT_EQ(n, static_cast<ssize_t>(sizeof(m)));
    if (m.type == 'R') deadline = std::chrono::steady_clock::now() + run_for;
    if (m.type == 'C') committed.insert(m.id);
    if (m.type == 'P') committed.erase(m.id);  // a Free in flight at the kill may or may not land
    if (m.type == 'F') freed.insert(m.id);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
}

// Reopens the tier and checks the recovered blocks against what the child reported.
void Verify(const std::string& dir, const std::set<uint64_t>& committed,
            const std::set<uint64_t>& freed, int round) {
  std::map<uint64_t, SlotId> visible;
  auto tier = NvmeTier::Open(CrashOptions(dir), [&](const BlockRecord& r, SlotId s) {
    EXPECT_EQ(r.key, testing::KeyOf(r.key.lo)) << "a block the child never wrote";
    EXPECT_TRUE(visible.emplace(r.key.lo, s).second) << "block " << r.key.lo << " twice";
  });
  ASSERT_TRUE(tier.ok()) << tier.status();
  for (uint64_t id : committed)
    EXPECT_TRUE(visible.count(id)) << "round " << round << ": lost " << id;
  auto want = Aligned(kSlotBytes), got = Aligned(kSlotBytes);
  for (const auto& [id, slot] : visible) {
    EXPECT_FALSE(freed.count(id)) << "round " << round << ": freed block " << id << " came back";
    EXPECT_LE(id / 1000000, static_cast<uint64_t>(round)) << "id from the future";
    ASSERT_TRUE(ReadSync(**tier, slot, got.get()).ok()) << "round " << round << " block " << id;
    FillPayload(id, want.get(), PayloadBytes(id));
    ASSERT_EQ(std::memcmp(want.get(), got.get(), PayloadBytes(id)), 0) << "block " << id;
  }
}

TEST(NvmeCrashTest, BlocksCommittedBeforeSigkillSurviveAndNothingElseIsVisible) {
  TempDir tmp;
  std::mt19937 rng(20261121);
  std::set<uint64_t> committed, freed;  // over all rounds: the child frees earlier rounds' blocks
  for (int round = 0; round < kRounds; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = StartChild(tmp.path(), round, fds);
    ASSERT_GE(pid, 0);
    ::close(fds[1]);
    const auto run_for = std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 250)(rng));
    Supervise(pid, fds[0], run_for, committed, freed);
    ::close(fds[0]);
    Verify(tmp.path(), committed, freed, round);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(committed.size() + freed.size(), static_cast<size_t>(kRounds))
      << "the child wrote too little";
  EXPECT_FALSE(kIsChild);
}

}  // namespace
}  // namespace kvtier
