// The metrics endpoint over real HTTP (issue 4, "Tests: Metrics"): values recorded by the op layer
// and counted by a real tier manager (T1 memfd, T2 real files) move as the work done says; every
// name follows Prometheus conventions and is documented; a bad address is a clear error.
#include "daemon/metrics.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "daemon/metrics_tiers.h"
#include "prometheus/check_names.h"
#include "tests/daemon/metrics_scrape.h"
#include "tests/tiers/tier_manager_test_util.h"
#include "tiers/tier_manager.h"

namespace kvtier {
namespace {

using testing::GetAndVerify;
using testing::HttpGet;
using testing::kTestSlot;
using testing::ManagerOptions;
using testing::MetricsPage;
using testing::Put;
using testing::TempDir;

// A daemon's metrics with T1 and T2 (no T0).
std::unique_ptr<DaemonMetrics> Serve() {
  auto m = DaemonMetrics::Create("127.0.0.1:0", TierBit(Tier::kT1) | TierBit(Tier::kT2));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// One scrape over HTTP, parsed.
MetricsPage Scrape(const DaemonMetrics& metrics) {
  absl::StatusOr<std::string> body = HttpGet(metrics.listening_port());
  EXPECT_TRUE(body.ok()) << body.status();
  return MetricsPage(body.ok() ? *body : "");
}

std::unique_ptr<TierManager> MakeManager(const TierManagerOptions& options) {
  auto m = TierManager::Create(options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(MetricsTest, ServesThePageOverHttpOnThePortItBound) {
  auto metrics = Serve();
  ASSERT_NE(metrics, nullptr);
  ASSERT_GT(metrics->listening_port(), 0);
  MetricsPage page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_build_info{version=\"" KVTIER_TEST_VERSION "\"}"), 1);
  EXPECT_EQ(page.Value("kvtier_lookups_total"), 0);
  EXPECT_EQ(page.Value("kvtier_connected_clients"), 0);
}

TEST(MetricsTest, LookupsCountHitsPerTierAndMissesInBlocksAndTokens) {
  auto metrics = Serve();
  ASSERT_NE(metrics, nullptr);
  metrics->OnLookup(10, {0, 3, 2}, 16);  // 5 hits (3 in T1, 2 in T2), 5 misses
  metrics->OnLookup(4, {4, 0, 0}, 16);   // all in T0
  metrics->OnLookup(7, {0, 0, 0}, 16);   // nothing cached
  MetricsPage page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_lookups_total"), 3);
  EXPECT_EQ(page.Value("kvtier_lookup_blocks_total{result=\"hit\"}"), 9);
  EXPECT_EQ(page.Value("kvtier_lookup_blocks_total{result=\"miss\"}"), 12);
  EXPECT_EQ(page.Value("kvtier_hit_blocks_total{tier=\"T0\"}"), 4);
  EXPECT_EQ(page.Value("kvtier_hit_blocks_total{tier=\"T1\"}"), 3);
  EXPECT_EQ(page.Value("kvtier_hit_blocks_total{tier=\"T2\"}"), 2);
  EXPECT_EQ(page.Value("kvtier_hit_tokens_total{tier=\"T1\"}"), 48);
  EXPECT_EQ(page.Value("kvtier_miss_tokens_total"), 12 * 16);
}

TEST(MetricsTest, RecordingFromManyThreadsWhileScrapingLosesNothing) {
  auto metrics = Serve();
  ASSERT_NE(metrics, nullptr);
  constexpr int kThreads = 4, kLookups = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kLookups; ++i) {
        metrics->OnLookup(3, {0, 1, 1}, 16);
        metrics->ObserveTransfer(TransferOp::kGet, 1e-4);
        metrics->AddLeases(1);
        metrics->AddLeases(-1);
      }
    });
  }
  for (int i = 0; i < 5; ++i) EXPECT_GT(Scrape(*metrics).size(), 0u);
  for (std::thread& t : threads) t.join();
  MetricsPage page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_lookups_total"), kThreads * kLookups);
  EXPECT_EQ(page.Value("kvtier_hit_blocks_total{tier=\"T2\"}"), kThreads * kLookups);
  EXPECT_EQ(page.Value("kvtier_lookup_blocks_total{result=\"miss\"}"), kThreads * kLookups);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count{op=\"get\"}"), kThreads * kLookups);
  EXPECT_EQ(page.Value("kvtier_leases_held"), 0);
}

TEST(MetricsTest, TransfersCopiesClientsAndLeasesMove) {
  auto metrics = Serve();
  ASSERT_NE(metrics, nullptr);
  metrics->ObserveTransfer(TransferOp::kGet, 40e-6);
  metrics->ObserveTransfer(TransferOp::kGet, 2e-3);
  // Beyond the last bucket: only +Inf.
  metrics->ObserveTierMove({MoveKind::kDemotion, Tier::kT1, Tier::kT2}, 30.0);
  metrics->ObserveTierMove({MoveKind::kPromotion, Tier::kT1, Tier::kT0}, 1e-3);  // no T0: ignored
  metrics->AddCopiedBytes(CopyDirection::kClientToT1, 1 << 20);
  metrics->AddCopiedBytes(CopyDirection::kT1ToClient, 4096);
  metrics->AddCopiedBytes(CopyDirection::kT1ToClient, 4096);
  metrics->SetConnectedClients(3);
  metrics->AddLeases(5);
  metrics->AddLeases(-2);
  MetricsPage page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count{op=\"get\"}"), 2);
  EXPECT_NEAR(page.Value("kvtier_transfer_seconds_sum{op=\"get\"}"), 2.04e-3, 1e-9);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_bucket{op=\"get\",le=\"+Inf\"}"), 2);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_bucket{op=\"get\",le=\"5e-05\"}"), 1);
  const std::string demote = "kvtier_transfer_seconds_bucket{direction=\"t1_to_t2\",op=\"demote\"";
  EXPECT_EQ(page.Value(demote + ",le=\"10\"}"), 0);
  EXPECT_EQ(page.Value(demote + ",le=\"+Inf\"}"), 1);
  EXPECT_FALSE(page.Get("kvtier_transfer_seconds_count{direction=\"t1_to_t0\",op=\"promote\"}"));
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count{op=\"put\"}"), 0);
  EXPECT_EQ(page.Value("kvtier_moved_bytes_total{direction=\"client_to_t1\"}"), 1 << 20);
  EXPECT_EQ(page.Value("kvtier_moved_bytes_total{direction=\"t1_to_client\"}"), 8192);
  EXPECT_EQ(page.Value("kvtier_connected_clients"), 3);
  EXPECT_EQ(page.Value("kvtier_leases_held"), 3);
  metrics->SetConnectedClients(0);
  metrics->AddLeases(-3);
  page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_connected_clients"), 0);
  EXPECT_EQ(page.Value("kvtier_leases_held"), 0);
}

TEST(MetricsTest, PutsAndGetsOnARealTierManagerShowAtTheNextScrape) {
  auto metrics = Serve();
  ASSERT_NE(metrics, nullptr);
  auto m = MakeManager(ManagerOptions(8, "", 0));
  ASSERT_NE(m, nullptr);
  metrics->WatchTiers(m.get());
  MetricsPage page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_tier_capacity_bytes{tier=\"T1\"}"), 8.0 * kTestSlot);
  EXPECT_EQ(page.Value("kvtier_tier_used_bytes{tier=\"T1\"}"), 0);
  EXPECT_EQ(page.Value("kvtier_tier_admitting{tier=\"T1\"}"), 1);
  EXPECT_EQ(page.Value("kvtier_tier_ready_fraction{tier=\"T1\"}"), 1);  // small: ready at Create
  EXPECT_EQ(page.Value("kvtier_put_blocks_total{result=\"stored\"}"), 0);
  EXPECT_FALSE(page.Get("kvtier_tier_capacity_bytes{tier=\"T2\"}"));  // no T2 configured

  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(*Put(*m, i), CommitOutcome::kStored);
  ASSERT_EQ(*Put(*m, 1), CommitOutcome::kAlreadyPresent);
  ASSERT_TRUE(GetAndVerify(*m, 2).ok());
  page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_put_blocks_total{result=\"stored\"}"), 3);
  EXPECT_EQ(page.Value("kvtier_put_blocks_total{result=\"already_present\"}"), 1);
  EXPECT_EQ(page.Value("kvtier_tier_used_bytes{tier=\"T1\"}"), 3.0 * kTestSlot);
  EXPECT_EQ(page.Value("kvtier_get_blocks_total{result=\"t1\"}"), 1);

  metrics->WatchTiers(nullptr);  // the manager may now go; its families leave the page
  page = Scrape(*metrics);
  EXPECT_FALSE(page.Get("kvtier_tier_used_bytes{tier=\"T1\"}"));
  EXPECT_TRUE(page.Get("kvtier_lookups_total"));
}

TEST(MetricsTest, DemotionAndPromotionMoveBytesAndEvictionsBetweenT1AndT2) {
  TempDir tmp;
  auto metrics = Serve();
  ASSERT_NE(metrics, nullptr);
  auto m = MakeManager(ManagerOptions(8, tmp.path(), 256));
  ASSERT_NE(m, nullptr);
  metrics->WatchTiers(m.get());
  MetricsPage page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_tier_capacity_bytes{tier=\"T2\"}"), 256.0 * kTestSlot);
  EXPECT_EQ(page.Value("kvtier_moved_bytes_total{direction=\"t1_to_t2\"}"), 0);

  uint64_t payload = 0;
  for (uint64_t i = 0; i < 40; ++i) {
    ASSERT_TRUE(Put(*m, i).ok()) << i;
    payload += testing::SizeOf(i);
  }
  m->Quiesce();
  ASSERT_TRUE(GetAndVerify(*m, 0).ok());  // evicted long ago: promoted from T2
  m->Quiesce();  // the promotion's room in T1 may have started one more demotion: let it finish
  page = Scrape(*metrics);
  const TierManagerStats s = m->Stats();
  ASSERT_GT(s.tier(Tier::kT1).moved_down, 0u);
  EXPECT_EQ(page.Value("kvtier_demotions_total{result=\"written\",tier=\"T1\"}"),
            s.tier(Tier::kT1).moved_down);
  EXPECT_EQ(page.Value("kvtier_evictions_total{tier=\"T1\"}"), s.tier(Tier::kT1).evictions);
  EXPECT_GT(page.Value("kvtier_moved_bytes_total{direction=\"t1_to_t2\"}"), 0);
  EXPECT_LE(page.Value("kvtier_moved_bytes_total{direction=\"t1_to_t2\"}"), payload);
  EXPECT_EQ(page.Value("kvtier_moved_bytes_total{direction=\"t2_to_t1\"}"), testing::SizeOf(0));
  EXPECT_EQ(page.Value("kvtier_get_blocks_total{result=\"promoted\"}"), 1);
  EXPECT_EQ(page.Value("kvtier_tier_used_bytes{tier=\"T2\"}"),
            s.tier(Tier::kT1).moved_down * 1.0 * kTestSlot);
  EXPECT_EQ(page.Value("kvtier_checksum_failures_total{tier=\"T2\"}"), 0);
  EXPECT_EQ(page.Value("kvtier_admissions_rejected_total{tier=\"T2\"}"), 0);
  // The op layer's client directions share the family with the tiers' own.
  EXPECT_EQ(page.Value("kvtier_moved_bytes_total{direction=\"client_to_t1\"}"), 0);
  metrics->WatchTiers(nullptr);
}

TEST(MetricsTest, TierMovesFeedThePromoteAndDemoteHistogramsByDirection) {
  TempDir tmp;
  auto metrics = Serve();  // outlives the manager, which reports moves until it is destroyed
  ASSERT_NE(metrics, nullptr);
  TierManagerOptions o = ManagerOptions(8, tmp.path(), 256);
  o.on_move = [m = metrics.get()](const TierMove& move, double seconds) {
    m->ObserveTierMove(move, seconds);
  };
  auto m = MakeManager(o);
  ASSERT_NE(m, nullptr);
  const std::string demote = "{direction=\"t1_to_t2\",op=\"demote\"}";
  const std::string promote = "{direction=\"t2_to_t1\",op=\"promote\"}";
  MetricsPage page = Scrape(*metrics);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count" + demote), 0);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count" + promote), 0);
  EXPECT_FALSE(page.Get("kvtier_transfer_seconds_count{direction=\"t0_to_t1\",op=\"demote\"}"));

  for (uint64_t i = 0; i < 40; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  m->Quiesce();
  ASSERT_TRUE(GetAndVerify(*m, 0).ok());  // evicted long ago: promoted from T2
  page = Scrape(*metrics);
  const TierManagerStats s = m->Stats();
  ASSERT_GT(s.tier(Tier::kT1).moved_down, 0u);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count" + demote), s.tier(Tier::kT1).moved_down);
  EXPECT_GT(page.Value("kvtier_transfer_seconds_sum" + demote), 0);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count" + promote), 1);
  EXPECT_GT(page.Value("kvtier_transfer_seconds_sum" + promote), 0);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count{op=\"get\"}"), 0);  // the op layer's own
}

TEST(MetricsTest, RejectedAdmissionsAreCountedForT2) {
  TempDir tmp;
  auto metrics = DaemonMetrics::Create("");  // no endpoint: the page is still rendered
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ((*metrics)->listening_port(), 0);
  TierManagerOptions o = ManagerOptions(8, tmp.path(), 256);
  o.t2_policy.admission.policy = "second";  // a block offered once is never admitted
  auto m = MakeManager(o);
  ASSERT_NE(m, nullptr);
  (*metrics)->WatchTiers(m.get());
  for (uint64_t i = 0; i < 30; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  m->Quiesce();
  MetricsPage page((*metrics)->Render());
  EXPECT_GT(page.Value("kvtier_admissions_rejected_total{tier=\"T2\"}"), 0);
  EXPECT_EQ(page.Value("kvtier_admissions_rejected_total{tier=\"T2\"}"),
            m->Stats().tier(Tier::kT1).rejected);
  EXPECT_EQ(page.Value("kvtier_demotions_total{result=\"written\",tier=\"T1\"}"), 0);
  (*metrics)->WatchTiers(nullptr);
}

TEST(MetricsTest, ABadAddressIsAnErrorNamingIt) {
  for (const char* bad : {"nonsense", "127.0.0.1:99999", "127.0.0.1:port", ":9464"}) {
    auto m = DaemonMetrics::Create(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
    EXPECT_NE(m.status().message().find(bad), std::string::npos) << m.status();
  }
  auto first = Serve();
  ASSERT_NE(first, nullptr);
  const std::string taken = "127.0.0.1:" + std::to_string(first->listening_port());
  auto second = DaemonMetrics::Create(taken);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(second.status().message().find(taken), std::string::npos) << second.status();
  EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status();
  auto not_local = DaemonMetrics::Create("192.0.2.1:0");  // TEST-NET-1: on no interface here
  ASSERT_FALSE(not_local.ok());
  EXPECT_EQ(not_local.status().code(), absl::StatusCode::kUnavailable) << not_local.status();
}

// Every family, with a T2 watched so every tier family is on the page.
std::string FullPage(const std::string& t2_dir) {
  auto metrics = DaemonMetrics::Create("");
  auto m = MakeManager(ManagerOptions(8, t2_dir, 16));
  if (!metrics.ok() || m == nullptr) return "";
  (*metrics)->WatchTiers(m.get());
  std::string page = (*metrics)->Render();
  (*metrics)->WatchTiers(nullptr);
  return page;
}

TEST(MetricsTest, EveryFamilyFollowsPrometheusNamingAndIsServedOnce) {
  TempDir tmp;
  const std::string page = FullPage(tmp.path());
  ASSERT_FALSE(page.empty());
  std::set<std::string> typed;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    std::string name, type;
    words >> name >> type;
    EXPECT_TRUE(typed.insert(name).second) << name << " has two TYPE lines";
    EXPECT_TRUE(prometheus::CheckMetricName(name)) << name;
    EXPECT_EQ(name.rfind("kvtier_", 0), 0u) << name;
    const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(type == "counter", total) << name << " is a " << type;
  }
  const std::vector<std::string> names = MetricFamilyNames();
  EXPECT_EQ(typed, std::set<std::string>(names.begin(), names.end()));
  for (const char* label : {"tier", "result", "direction", "op", "version"}) {
    EXPECT_TRUE(prometheus::CheckLabelName(label)) << label;
  }
}

TEST(MetricsTest, EveryFamilyIsDocumented) {
  std::ifstream in(KVTIER_SOURCE_DIR "/docs/metrics.md");
  ASSERT_TRUE(in.good());
  std::stringstream doc;
  doc << in.rdbuf();
  for (const std::string& name : MetricFamilyNames()) {
    EXPECT_NE(doc.str().find("`" + name), std::string::npos) << name << " not in docs/metrics.md";
  }
}

TEST(MetricsTest, FamiliesOfTheSameNameMergeIntoOne) {
  prometheus::MetricFamily a{"kvtier_x_total", "help", prometheus::MetricType::Counter, {}};
  a.metric.resize(1);
  prometheus::MetricFamily b = a;
  b.metric.resize(2);
  std::vector<prometheus::MetricFamily> into{a};
  internal::MergeFamilies(into, {b});
  ASSERT_EQ(into.size(), 1u);
  EXPECT_EQ(into[0].metric.size(), 3u);
}

// A daemon of several memory pools records each pool's requests under its own pool label, and
// has no unlabelled request series beside them.
TEST(MetricsTest, EachPoolRecordsItsRequestsUnderItsOwnLabel) {
  auto m =
      DaemonMetrics::Create("127.0.0.1:0", TierBit(Tier::kT1) | TierBit(Tier::kT2), {}, {"a", "b"});
  ASSERT_TRUE(m.ok()) << m.status();
  DaemonMetrics& metrics = **m;
  ASSERT_NE(metrics.ForPool(0), metrics.ForPool(1));
  metrics.ForPool(1)->OnLookup(10, {0, 4, 0, 0}, 16);
  metrics.ForPool(1)->AddConnectedClients(1);
  metrics.ForPool(0)->ObserveTierMove({MoveKind::kDemotion, Tier::kT1, Tier::kT2}, 1e-3);
  const MetricsPage page = Scrape(metrics);
  EXPECT_EQ(page.Value("kvtier_lookups_total{pool=\"b\"}"), 1);
  EXPECT_EQ(page.Value("kvtier_lookups_total{pool=\"a\"}"), 0);
  EXPECT_EQ(page.Value("kvtier_hit_blocks_total{pool=\"b\",tier=\"T1\"}"), 4);
  EXPECT_EQ(page.Value("kvtier_connected_clients{pool=\"b\"}"), 1);
  EXPECT_EQ(
      page.Value("kvtier_transfer_seconds_count{direction=\"t1_to_t2\",op=\"demote\",pool=\"a\"}"),
      1);
  EXPECT_FALSE(page.Get("kvtier_lookups_total").has_value());
  EXPECT_FALSE(page.Get("kvtier_connected_clients").has_value());
  // Without pools, the object records for itself.
  auto single = Serve();
  ASSERT_NE(single, nullptr);
  EXPECT_EQ(single->ForPool(0), single.get());
}

}  // namespace
}  // namespace kvtier
