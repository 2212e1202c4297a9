// The fixture of the tests that run real kvtierd processes with a remote tier (T3) on real
// redis-server processes (kvtierd_remote_test.cc): a fleet's shared key-scope secret, a 3+3 Redis
// Cluster or a standalone server, daemons with a small T1 and no T2 (so T1's victims go to T3),
// and the waits the tests need. Each daemon is stopped with SIGTERM at the end and must exit 0.
//
// Thread-safety: none; the test's main thread drives it.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon/kvtierd_test_util.h"
#include "tests/daemon/metrics_scrape.h"
#include "tests/tiers/remote/redis_test_util.h"

namespace kvtier::testing {

class KvtierdRemoteTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kT1Slots = 64;  // of kItSlotBytes: T1 is 1 MiB

  void SetUp() override {
    const std::string skip = RedisSkipReason();
    if (!skip.empty()) GTEST_SKIP() << skip;
    secret_ = dir_.path() + "/fleet-key-scope.secret";
    std::string bytes(192, '\0');
    std::mt19937_64 rng(std::random_device{}());
    for (char& b : bytes) b = static_cast<char>(rng());
    std::ofstream(secret_, std::ios::binary) << bytes;
    ::chmod(secret_.c_str(), 0600);  // as docs/configuration.md says to make it
  }

  void TearDown() override {
    for (auto& [name, d] : daemons_) {
      const int status = d->Stop(SIGTERM);
      EXPECT_TRUE(ExitedZero(status))
          << name << " after SIGTERM: " << DescribeWaitStatus(status) << "\n"
          << d->Log();
    }
  }

  void StartCluster() {
    auto cluster = RedisCluster::Start(redis_dir_.path());
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
  }

  // A daemon named `name` (its own directory) on the store at `nodes`; null (and a failure) if it
  // did not start. With `metrics_port`, its metrics endpoint serves on a free port put there.
  KvtierdProcess* StartRemoteDaemon(const std::string& name, const std::vector<std::string>& nodes,
                                    std::vector<std::string> extra = {},
                                    int* metrics_port = nullptr) {
    const std::string dir = dir_.path() + "/" + name;
    ::mkdir(dir.c_str(), 0750);
    std::string list;
    for (const std::string& n : nodes) list += (list.empty() ? "" : ",") + n;
    std::vector<std::string> flags = {"--t1.capacity_bytes",
                                      std::to_string(kT1Slots * kItSlotBytes),
                                      "--t1.slot_bytes",
                                      std::to_string(kItSlotBytes),
                                      "--t1.dma_chunk_bytes",
                                      std::to_string(kT1Slots * kItSlotBytes),
                                      "--t1.touch_threads",
                                      "1",
                                      "--t1.huge_pages",
                                      "off",
                                      "--t2.enabled",
                                      "false",
                                      "--daemon.key_scope_file",
                                      secret_,
                                      "--remote.enabled",
                                      "true",
                                      "--remote.nodes",
                                      list,
                                      "--remote.capacity_bytes",
                                      "64MiB",
                                      "--remote.breaker_open_ms",
                                      "200",
                                      "--remote.command_timeout_ms",
                                      "1000",
                                      "--remote.lookup_budget_us",
                                      "500000"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto d = metrics_port == nullptr ? KvtierdProcess::Start(dir, flags)
                                     : StartWithMetrics(dir, flags, metrics_port);
    EXPECT_TRUE(d.ok()) << name << ": " << d.status();
    if (!d.ok()) return nullptr;
    daemons_.emplace_back(name, std::move(*d));
    return daemons_.back().second.get();
  }

  // Stores filler blocks (a new prefix each call) until everything stored before has left T1.
  // In chunks well under T1's size: PutRetrying puts its keys again until none is refused, and
  // with no room below (a store that is down) more keys than T1 holds would evict each other.
  void PushOutOfT1(client::Client& c) {
    const std::vector<BlockKey> filler = SeqKeys(c, 900 + filler_calls_++, 3 * kT1Slots);
    for (size_t at = 0; at < filler.size(); at += kT1Slots / 4) {
      const std::vector<BlockKey> chunk(filler.begin() + static_cast<ptrdiff_t>(at),
                                        filler.begin() + static_cast<ptrdiff_t>(at + kT1Slots / 4));
      ASSERT_TRUE(PutRetrying(c, chunk).ok());
    }
  }

  // Until a lookup through `c` finds every block of `keys` (T1's victims reach the store in the
  // background), or a hang guard passes.
  static bool WaitForPrefix(client::Client& c, const std::vector<BlockKey>& keys) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto looked = c.Lookup(keys);
      if (looked.ok() && looked->hit_blocks == keys.size()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // The value of `series` on the daemon's metrics page; -1 when absent or not scraped.
  static double Metric(int port, const std::string& series) {
    absl::StatusOr<std::string> page = HttpGet(port);
    return page.ok() ? MetricsPage(*page).Value(series) : -1;
  }

  // Until `series` reads `want` on the page at `port`, or a hang guard passes.
  static bool WaitForMetric(int port, const std::string& series, double want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Metric(port, series) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  TempDir dir_;
  RedisTempDir redis_dir_;
  std::string secret_;
  std::unique_ptr<RedisCluster> cluster_;
  std::vector<std::pair<std::string, std::unique_ptr<KvtierdProcess>>> daemons_;
  uint32_t filler_calls_ = 0;
};

}  // namespace kvtier::testing
