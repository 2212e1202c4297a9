// A real kvtierd stopped under load — by SIGTERM and by SIGKILL — while client processes put in
// a loop, then started again on the same data directory (DESIGN.md "Reliability rules": a daemon
// killed at any instant restarts with every block that was committed to T2 and durable).
//
// T1 is small (64 slots), so most blocks are demoted to T2 as the loaders go. Before the stop, a
// watcher records which blocks Lookup places in T2: those must all be served after the restart.
// A block that was only in T1 may be gone after a SIGKILL, and after a SIGTERM when the flush to
// T2 was cut short; any block that is served must be whole and correct. T2 is sized so that it
// never evicts here. The last tests pin daemon.flush_on_stop: blocks only in T1 at a SIGTERM are
// written to T2 and served after the restart (and, with the setting off, are gone).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/daemon/kvtierd_test_util.h"
#include "tests/daemon/metrics_scrape.h"

namespace kvtier {
namespace {

using testing::ItNamespace;
using testing::KvtierdProcess;
using testing::Pipe;
using testing::PutKeys;
using testing::SeqKeys;

constexpr int kLoaders = 2;
constexpr uint32_t kSequences = 600;  // per loader, of kBlocks blocks: 2400 of T2's 4096 slots
constexpr uint32_t kBlocks = 2;

uint32_t SeedOf(int loader, uint32_t sequence) { return (loader + 1) * 100000 + sequence; }

using KeySet = std::set<std::pair<uint64_t, uint64_t>>;

class KvtierdRestartTest : public ::testing::Test {
 protected:
  absl::Status StartDaemon() {
    auto d = testing::StartWithMetrics(
        dir_.path(),
        {"--t1.capacity_bytes", "1MiB", "--t1.slot_bytes", "16KiB", "--t1.dma_chunk_bytes", "1MiB",
         "--t1.touch_threads", "1", "--t1.huge_pages", "off", "--t2.capacity_bytes", "64MiB"},
        &metrics_port_);
    if (d.ok()) daemon_ = std::move(*d);
    return d.status();
  }

  // A loader puts its sequences in order, retrying blocks T1 had no room for, and signals each
  // one stored; past the last it starts over (all present by then: still requests). It ends,
  // exit 0, when the daemon goes away.
  pid_t StartLoader(int loader, const Pipe& progress) {
    return testing::RunChild([&, loader] {
      auto c = testing::ConnectTo(*daemon_, ItNamespace(), "loader");
      if (!c.ok()) return 1;
      for (uint32_t n = 0;; ++n) {
        const std::vector<BlockKey> keys = SeqKeys(**c, SeedOf(loader, n % kSequences), kBlocks);
        const absl::Status put = testing::PutRetrying(**c, keys);
        if (!put.ok() && absl::IsAborted(put)) {
          std::fprintf(stderr, "loader %d: %s\n", loader, put.ToString().c_str());
          return 2;
        }
        if (!put.ok()) return 0;  // the daemon is gone
        if (n < kSequences) progress.Signal();
      }
    });
  }

  // The keys Lookup places in T2 now.
  KeySet KeysInT2(client::Client& c) {
    KeySet in_t2;
    for (int loader = 0; loader < kLoaders; ++loader) {
      for (uint32_t s = 0; s < kSequences; ++s) {
        const std::vector<BlockKey> keys = SeqKeys(c, SeedOf(loader, s), kBlocks);
        auto hit = c.Lookup(keys);
        EXPECT_TRUE(hit.ok()) << hit.status();
        for (size_t i = 0; hit.ok() && i < hit->hit_blocks; ++i) {
          if (hit->tiers[i] & TierBit(Tier::kT2)) in_t2.insert({keys[i].lo, keys[i].hi});
        }
      }
    }
    return in_t2;
  }

  // Stops the daemon by `signo` while the loaders put, restarts it, and checks what it serves.
  void StopUnderLoadAndRestart(int signo) {
    const absl::Status started = StartDaemon();
    ASSERT_TRUE(started.ok()) << started;
    Pipe progress;
    std::vector<pid_t> loaders;
    for (int loader = 0; loader < kLoaders; ++loader) {
      loaders.push_back(StartLoader(loader, progress));
    }
    ASSERT_TRUE(progress.Await(300)) << daemon_->Log();  // 600 blocks: most of them in T2 by now
    KeySet in_t2;
    {
      auto watcher = testing::ConnectTo(*daemon_, ItNamespace(), "watcher");
      ASSERT_TRUE(watcher.ok()) << watcher.status();
      in_t2 = KeysInT2(**watcher);
    }
    ASSERT_GT(in_t2.size(), 0u) << daemon_->Log();
    const int status = daemon_->Stop(signo);
    if (signo == SIGTERM) {
      EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status) << "\n"
                                               << daemon_->Log();
    } else {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signo)
          << testing::DescribeWaitStatus(status);
    }
    for (pid_t loader : loaders) {
      const int s = testing::WaitChild(loader);
      EXPECT_TRUE(testing::ExitedZero(s)) << testing::DescribeWaitStatus(s);
    }
    const std::string before = daemon_->Log();
    const absl::Status restarted = StartDaemon();
    ASSERT_TRUE(restarted.ok()) << restarted << "\nlog before the stop:\n" << before;
    // Recovered from T2's records at start: at least what was seen there (blocks demoted after
    // the look are recovered too).
    absl::StatusOr<std::string> page = testing::HttpGet(metrics_port_);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_GE(testing::MetricsPage(*page).Value("kvtier_recovered_blocks"),
              static_cast<double>(in_t2.size()));
    ExpectServedAfterRestart(in_t2);
    const int second = daemon_->Stop(SIGTERM);
    EXPECT_TRUE(testing::ExitedZero(second)) << testing::DescribeWaitStatus(second) << "\n"
                                             << daemon_->Log();
  }

  void ExpectServedAfterRestart(const KeySet& in_t2) {
    auto c = testing::ConnectTo(*daemon_, ItNamespace(), "checker");
    ASSERT_TRUE(c.ok()) << c.status();
    size_t found_in_t2 = 0;
    for (int loader = 0; loader < kLoaders; ++loader) {
      for (uint32_t s = 0; s < kSequences; ++s) {
        const std::vector<BlockKey> keys = SeqKeys(**c, SeedOf(loader, s), kBlocks);
        std::vector<bool> found;
        const absl::Status check = testing::CheckFound(**c, keys, &found);
        ASSERT_TRUE(check.ok()) << "loader " << loader << " sequence " << s << ": " << check;
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!in_t2.contains({keys[i].lo, keys[i].hi})) continue;
          EXPECT_TRUE(found[i]) << "loader " << loader << " sequence " << s << " block " << i
                                << " was in T2 before the stop";
          found_in_t2 += found[i] ? 1 : 0;
        }
      }
    }
    EXPECT_EQ(found_in_t2, in_t2.size()) << daemon_->Log();
    EXPECT_EQ((*c)->Stats()->leases_held, 0u);
  }

  testing::TempDir dir_;
  int metrics_port_ = 0;
  std::unique_ptr<KvtierdProcess> daemon_;
};

TEST_F(KvtierdRestartTest, SigtermUnderLoadKeepsEveryBlockThatWasInT2) {
  StopUnderLoadAndRestart(SIGTERM);
}

TEST_F(KvtierdRestartTest, SigkillUnderLoadKeepsEveryBlockThatWasInT2) {
  StopUnderLoadAndRestart(SIGKILL);
}

// Puts 20 blocks (T1 is far below its watermark: they stay in T1 only), stops the daemon with
// SIGTERM, starts it again; the blocks found then, each checked byte for byte.
size_t FoundAfterSigtermRestart(bool flush_on_stop, std::string* log) {
  testing::TempDir dir;
  const std::vector<std::string> flags = {
      "--t1.capacity_bytes",    "1MiB",
      "--t1.slot_bytes",        "16KiB",
      "--t1.dma_chunk_bytes",   "1MiB",
      "--t1.touch_threads",     "1",
      "--t1.huge_pages",        "off",
      "--t2.capacity_bytes",    "4MiB",
      "--daemon.flush_on_stop", flush_on_stop ? "true" : "false"};
  auto daemon = KvtierdProcess::Start(dir.path(), flags);
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  if (!daemon.ok()) return 0;
  std::vector<BlockKey> keys;
  {
    auto c = testing::ConnectTo(**daemon, ItNamespace(), "writer");
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return 0;
    keys = SeqKeys(**c, 11, 20);
    auto codes = PutKeys(**c, keys);
    EXPECT_TRUE(codes.ok()) << codes.status();
    for (protocol::BlockCode code : codes.value_or(std::vector<protocol::BlockCode>{})) {
      EXPECT_EQ(code, protocol::BlockCode::kOk);
    }
    auto hit = (*c)->Lookup(keys);
    EXPECT_TRUE(hit.ok() && hit->hit_blocks == keys.size());
    for (size_t i = 0; hit.ok() && i < hit->hit_blocks; ++i) {
      EXPECT_EQ(hit->tiers[i], TierBit(Tier::kT1)) << "block " << i << " is not in T1 only";
    }
  }
  const int status = (*daemon)->Stop(SIGTERM);
  EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
  *log = (*daemon)->Log();
  daemon = KvtierdProcess::Start(dir.path(), flags);
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  if (!daemon.ok()) return 0;
  auto c = testing::ConnectTo(**daemon, ItNamespace(), "reader");
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return 0;
  auto hit = (*c)->Lookup(keys);
  EXPECT_TRUE(hit.ok()) << hit.status();
  for (size_t i = 0; hit.ok() && i < hit->hit_blocks; ++i) {
    EXPECT_EQ(hit->tiers[i], TierBit(Tier::kT2)) << "block " << i;
  }
  std::vector<bool> found;
  const absl::Status check = testing::CheckFound(**c, keys, &found);
  EXPECT_TRUE(check.ok()) << check;
  return static_cast<size_t>(std::count(found.begin(), found.end(), true));
}

TEST(KvtierdStopTest, SigtermWritesT1OnlyBlocksToT2AndARestartServesThem) {
  std::string log;
  EXPECT_EQ(FoundAfterSigtermRestart(/*flush_on_stop=*/true, &log), 20u) << log;
  EXPECT_NE(log.find("flushed T1: 20 blocks written to T2, 0 not"), std::string::npos) << log;
}

TEST(KvtierdStopTest, WithoutFlushOnStopT1OnlyBlocksAreGoneAfterARestart) {
  std::string log;
  EXPECT_EQ(FoundAfterSigtermRestart(/*flush_on_stop=*/false, &log), 0u) << log;
  EXPECT_EQ(log.find("flushed T1"), std::string::npos) << log;
}

}  // namespace
}  // namespace kvtier
