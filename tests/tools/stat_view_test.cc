// `kvtier stat` without a daemon: metrics addresses, reading the text format by family and label,
// and the screen computed from two scrapes (occupancy, hit ratios total and over the interval,
// rates).
#include "tools/stat/stat_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tools/stat/metrics_source.h"

namespace kvtier::stat {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsUrlTest, AcceptsHostPortAndUrls) {
  absl::StatusOr<MetricsUrl> u = ParseMetricsUrl("127.0.0.1:9464");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->ToString(), "http://127.0.0.1:9464/metrics");
  u = ParseMetricsUrl("http://localhost:80/prom");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->path, "/prom");
  for (const char* bad : {"localhost", "host:", ":80", "http://h:8x/metrics"}) {
    EXPECT_FALSE(ParseMetricsUrl(bad).ok()) << bad;
  }
}

TEST(MetricsUrlTest, AnUnreachableDaemonIsNamedInTheError) {
  // Port 1 on loopback: nothing listens there on a test machine.
  const absl::StatusOr<std::string> got = FetchMetrics(*ParseMetricsUrl("127.0.0.1:1"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("http://127.0.0.1:1/metrics"));
}

constexpr char kBefore[] = R"(# HELP kvtier_build_info x
kvtier_build_info{version="0.1.0"} 1
kvtier_connected_clients 2
kvtier_leases_held 0
kvtier_tier_capacity_bytes{tier="T1"} 1073741824
kvtier_tier_used_bytes{tier="T1"} 268435456
kvtier_tier_admitting{tier="T1"} 1
kvtier_tier_capacity_bytes{tier="T2"} 4294967296
kvtier_tier_used_bytes{tier="T2"} 0
kvtier_tier_admitting{tier="T2"} 0
kvtier_lookups_total 100
kvtier_lookup_blocks_total{result="hit"} 300
kvtier_lookup_blocks_total{result="miss"} 700
kvtier_hit_blocks_total{tier="T1"} 200
kvtier_hit_blocks_total{tier="T2"} 100
kvtier_moved_bytes_total{direction="client_to_t1"} 1048576
kvtier_evictions_total{tier="T1"} 10
)";

TEST(MetricsSampleTest, SumsFamiliesAndSelectsByLabel) {
  const MetricsSample s(kBefore);
  EXPECT_EQ(s.Sum("kvtier_lookup_blocks_total"), 1000);
  EXPECT_EQ(s.SumWhere("kvtier_lookup_blocks_total", "result", "hit"), 300);
  EXPECT_EQ(s.Sum("kvtier_lookups"), 0);  // a prefix of a name is not a family
  EXPECT_EQ(s.LabelValues("kvtier_tier_capacity_bytes", "tier"),
            (std::set<std::string>{"T1", "T2"}));
  EXPECT_EQ(s.Get("kvtier_connected_clients"), 2);
  EXPECT_FALSE(s.Get("kvtier_nothing").has_value());
}

TEST(StatViewTest, ScreenHasTiersHitRatiosAndRatesBetweenTwoScrapes) {
  std::string after = kBefore;
  auto bump = [&after](const std::string& series, const std::string& to) {
    const size_t at = after.find(series + " ");
    const size_t end = after.find('\n', at);
    after.replace(at, end - at, series + " " + to);
  };
  bump("kvtier_lookups_total", "300");                         // +200 in 2 s
  bump("kvtier_lookup_blocks_total{result=\"hit\"}", "1100");  // +800 of +1000: 80%
  bump("kvtier_lookup_blocks_total{result=\"miss\"}", "900");
  bump("kvtier_hit_blocks_total{tier=\"T1\"}", "1000");
  bump("kvtier_moved_bytes_total{direction=\"client_to_t1\"}", "5242880");  // +4 MiB
  StatInput in;
  in.source = "http://127.0.0.1:9464/metrics";
  in.before = MetricsSample(kBefore);
  in.now = MetricsSample(after);
  in.interval_s = 2;
  const std::string screen = FormatStatScreen(in);
  EXPECT_THAT(screen, HasSubstr("kvtierd 0.1.0 at http://127.0.0.1:9464/metrics: 2 clients"));
  EXPECT_THAT(screen, HasSubstr("rates over 2.00 s"));
  EXPECT_THAT(screen, ContainsRegex("T1 +1.0 GiB +256.0 MiB +25.0% +yes"));
  EXPECT_THAT(screen, ContainsRegex("T2 +4.0 GiB +0 B +0.0% +NO"));
  EXPECT_THAT(screen, ContainsRegex("all tiers +55.0% +80.0%"));
  EXPECT_THAT(screen, ContainsRegex("  T1 +50.0% +80.0%"));
  EXPECT_THAT(screen, ContainsRegex("lookups +300 +100.0/s"));
  EXPECT_THAT(screen, ContainsRegex("client_to_t1 +5.0 MiB +2.0 MiB/s"));
}

TEST(StatViewTest, OneScrapeShowsTotalsWithoutRates) {
  StatInput in;
  in.source = "x";
  in.now = MetricsSample(kBefore);
  const std::string screen = FormatStatScreen(in);
  EXPECT_THAT(screen, HasSubstr("no rates (one scrape)"));
  EXPECT_THAT(screen, ContainsRegex("all tiers +30.0% +-"));
}

// A daemon of several pools labels its tier families with the pool: a row per pool and tier.
TEST(StatViewTest, PoolsGetARowPerPoolAndTier) {
  StatInput in;
  in.source = "x";
  in.now = MetricsSample(
      "kvtier_tier_capacity_bytes{pool=\"a\",tier=\"T1\"} 1048576\n"
      "kvtier_tier_capacity_bytes{pool=\"b\",tier=\"T1\"} 2097152\n"
      "kvtier_tier_capacity_bytes{pool=\"b\",tier=\"T2\"} 4194304\n"
      "kvtier_tier_used_bytes{pool=\"a\",tier=\"T1\"} 524288\n"
      "kvtier_tier_used_bytes{pool=\"b\",tier=\"T1\"} 0\n"
      "kvtier_tier_admitting{pool=\"a\",tier=\"T1\"} 1\n"
      "kvtier_tier_admitting{pool=\"b\",tier=\"T1\"} 1\n");
  const std::string screen = FormatStatScreen(in);
  EXPECT_THAT(screen, ContainsRegex("pool +tier +capacity"));
  EXPECT_THAT(screen, ContainsRegex("a +T1 +1.0 MiB +512.0 KiB +50.0% +yes"));
  EXPECT_THAT(screen, ContainsRegex("b +T1 +2.0 MiB +0 B +0.0% +yes"));
  EXPECT_THAT(screen, ContainsRegex("b +T2 +4.0 MiB +0 B +0.0% +NO"));
  EXPECT_THAT(screen, Not(ContainsRegex("a +T2")));  // pool a runs no T2
}

TEST(StatViewTest, HumanBytesUsesBinaryUnits) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(3.0 * (1ull << 30)), "3.0 GiB");
}

}  // namespace
}  // namespace kvtier::stat
