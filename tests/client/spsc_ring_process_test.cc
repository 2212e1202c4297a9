// The ring between two real processes (fork, one shared memfd): millions of records arrive in
// order and intact while each side sometimes stalls, so the other runs into an empty or full ring
// and sleeps; and a ping-pong where every wait sleeps, which hangs if a wakeup is ever lost (the
// alarm turns such a hang into a failure instead of a stuck test).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <random>

#include "client/protocol/shm_region.h"
#include "client/protocol/spsc_ring.h"

namespace kvtier::protocol {
namespace {

constexpr unsigned kWatchdogSeconds = 240;

struct Record {
  uint64_t words[8];
};

Record Make(uint64_t seq) {
  Record r;
  r.words[0] = seq;
  for (int i = 1; i < 8; ++i) r.words[i] = (seq + i) * 0x9E3779B97F4A7C15ull;
  return r;
}
bool Intact(const Record& r, uint64_t seq) {
  const Record expected = Make(seq);
  return std::memcmp(&r, &expected, sizeof(r)) == 0;
}

class RingProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto region = ShmRegion::Create(*ComputeLayout(64, 64, 4096));
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = std::move(*region);
    client_bell_ = std::make_unique<EventFd>(*EventFd::Create());
    daemon_bell_ = std::make_unique<EventFd>(*EventFd::Create());
  }
  // Runs `child` in a forked process; returns its exit status (0 = success).
  template <typename F>
  pid_t Fork(F child) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(kWatchdogSeconds);
      _exit(child());
    }
    return pid;
  }
  int Join(pid_t pid) {
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::unique_ptr<ShmRegion> region_;
  std::unique_ptr<EventFd> client_bell_, daemon_bell_;
};

TEST_F(RingProcessTest, MillionsOfRecordsArriveInOrderWhileBothSidesSleepSometimes) {
  constexpr uint64_t kRecords = 3'000'000;
  // The daemon's role: consumes the submission ring, stalling now and then so the ring fills.
  const pid_t pid = Fork([&] {
    RingConsumer consumer(region_->submission(), client_bell_.get());
    std::mt19937_64 rng(2);
    Record r;
    for (uint64_t seq = 0; seq < kRecords; ++seq) {
      if (!consumer.Pop(&r, *daemon_bell_, seq % 2 ? 64 : 0).ok()) return 2;
      if (!Intact(r, seq)) return 3;
      if (rng() % 100'000 == 0) usleep(300);
    }
    return 0;
  });
  alarm(kWatchdogSeconds);
  RingProducer producer(region_->submission(), daemon_bell_.get());
  std::mt19937_64 rng(1);
  for (uint64_t seq = 0; seq < kRecords; ++seq) {
    const Record r = Make(seq);
    ASSERT_TRUE(producer.Push(&r, *client_bell_, seq % 3 ? 32 : 0).ok());
    if (rng() % 100'000 == 0) usleep(300);  // the consumer empties the ring and sleeps
  }
  EXPECT_EQ(Join(pid), 0);
  alarm(0);
  EXPECT_EQ(region_->submission().control->tail, kRecords);
}

TEST_F(RingProcessTest, PingPongWhereEveryWaitSleepsLosesNoWakeup) {
  constexpr uint64_t kRounds = 100'000;
  const pid_t pid = Fork([&] {
    RingConsumer requests(region_->submission(), client_bell_.get());
    RingProducer completions(region_->completion(), client_bell_.get());
    Record r;
    for (uint64_t seq = 0; seq < kRounds; ++seq) {
      if (!requests.Pop(&r, *daemon_bell_).ok()) return 2;
      if (!Intact(r, seq)) return 3;
      const Record answer = Make(seq + kRounds);
      if (!completions.Push(&answer, *daemon_bell_).ok()) return 4;
    }
    return 0;
  });
  alarm(kWatchdogSeconds);
  RingProducer requests(region_->submission(), daemon_bell_.get());
  RingConsumer completions(region_->completion(), daemon_bell_.get());
  Record r;
  for (uint64_t seq = 0; seq < kRounds; ++seq) {
    const Record q = Make(seq);
    ASSERT_TRUE(requests.Push(&q, *client_bell_).ok());
    ASSERT_TRUE(completions.Pop(&r, *client_bell_).ok());
    ASSERT_TRUE(Intact(r, seq + kRounds)) << seq;
  }
  EXPECT_EQ(Join(pid), 0);
  alarm(0);
}

}  // namespace
}  // namespace kvtier::protocol
