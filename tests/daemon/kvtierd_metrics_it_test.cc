// A real kvtierd's Prometheus endpoint, scraped over HTTP while a client puts, looks up, gets and
// goes away: the values move as docs/metrics.md says (clients, leases, puts, T1 occupancy, bytes
// moved, lookups and hits, gets by tier), and the tier manager's demotions and promotions reach
// the latency histograms.
#include <gtest/gtest.h>

#include "tests/daemon/kvtierd_test_util.h"
#include "tests/daemon/metrics_scrape.h"

namespace kvtier {
namespace {

using testing::ItNamespace;
using testing::kItSlotBytes;
using testing::KvtierdProcess;
using testing::MetricsPage;
using testing::PutKeys;
using testing::SeqKeys;

class KvtierdMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = testing::StartWithMetrics(
        dir_.path(),
        {"--t1.capacity_bytes", "4MiB", "--t1.slot_bytes", "16KiB", "--t1.dma_chunk_bytes", "1MiB",
         "--t1.touch_threads", "1", "--t1.huge_pages", "off", "--t2.capacity_bytes", "8MiB"},
        &port_);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  MetricsPage Scrape() {
    absl::StatusOr<std::string> body = testing::HttpGet(port_);
    EXPECT_TRUE(body.ok()) << body.status() << "\n" << daemon_->Log();
    return MetricsPage(body.ok() ? *body : "");
  }

  testing::TempDir dir_;
  int port_ = 0;
  std::unique_ptr<KvtierdProcess> daemon_;
};

TEST_F(KvtierdMetricsTest, ValuesMoveWithClientsPutsLookupsAndGets) {
  MetricsPage page = Scrape();
  EXPECT_EQ(page.Value("kvtier_connected_clients"), 0);
  EXPECT_EQ(page.Value("kvtier_tier_capacity_bytes{tier=\"T1\"}"), 4 << 20);
  EXPECT_EQ(page.Value("kvtier_tier_capacity_bytes{tier=\"T2\"}"), 8 << 20);
  EXPECT_EQ(page.Value("kvtier_tier_used_bytes{tier=\"T1\"}"), 0);
  EXPECT_EQ(page.Value("kvtier_put_blocks_total{result=\"stored\"}"), 0);

  auto c = testing::ConnectTo(*daemon_, ItNamespace(), "metrics");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Scrape().Value("kvtier_connected_clients"), 1);

  const std::vector<BlockKey> keys = SeqKeys(**c, 1, 10);
  double payload_bytes = 0;
  for (const BlockKey& k : keys) payload_bytes += testing::PayloadBytes(k);
  ASSERT_EQ(*PutKeys(**c, keys), std::vector<protocol::BlockCode>(10, protocol::BlockCode::kOk));
  page = Scrape();
  EXPECT_EQ(page.Value("kvtier_put_blocks_total{result=\"stored\"}"), 10);
  EXPECT_EQ(page.Value("kvtier_tier_used_bytes{tier=\"T1\"}"), 10 * kItSlotBytes);
  EXPECT_EQ(page.Value("kvtier_moved_bytes_total{direction=\"client_to_t1\"}"), payload_bytes);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count{op=\"put\"}"), 10);

  ASSERT_EQ((*c)->Lookup(keys)->hit_blocks, 10u);
  ASSERT_EQ((*c)->Lookup(SeqKeys(**c, 2, 5))->hit_blocks, 0u);
  page = Scrape();
  EXPECT_EQ(page.Value("kvtier_lookups_total"), 2);
  EXPECT_EQ(page.Value("kvtier_lookup_blocks_total{result=\"hit\"}"), 10);
  EXPECT_EQ(page.Value("kvtier_lookup_blocks_total{result=\"miss\"}"), 5);
  EXPECT_EQ(page.Value("kvtier_hit_blocks_total{tier=\"T1\"}"), 10);
  EXPECT_EQ(page.Value("kvtier_hit_tokens_total{tier=\"T1\"}"), 40);
  EXPECT_EQ(page.Value("kvtier_miss_tokens_total"), 20);

  auto got = (*c)->Get(keys);
  ASSERT_TRUE(got.ok()) << got.status();
  page = Scrape();
  EXPECT_EQ(page.Value("kvtier_leases_held"), 10);
  EXPECT_EQ(page.Value("kvtier_get_blocks_total{result=\"t1\"}"), 10);
  EXPECT_EQ(page.Value("kvtier_moved_bytes_total{direction=\"t1_to_client\"}"), payload_bytes);
  EXPECT_EQ(page.Value("kvtier_transfer_seconds_count{op=\"get\"}"), 1);  // one request
  ASSERT_TRUE((*c)->Release(keys).ok());
  EXPECT_EQ(Scrape().Value("kvtier_leases_held"), 0);

  // A second client comes and goes; the gauge follows (the daemon learns of the close
  // asynchronously, so wait for it).
  auto other = testing::ConnectTo(*daemon_, ItNamespace(), "other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(Scrape().Value("kvtier_connected_clients"), 2);
  other->reset();
  EXPECT_TRUE(testing::Eventually([&] { return Scrape().Value("kvtier_connected_clients") == 1; }));
  c->reset();
  EXPECT_TRUE(testing::Eventually([&] { return Scrape().Value("kvtier_connected_clients") == 0; }));
  EXPECT_EQ(Scrape().Value("kvtier_tier_used_bytes{tier=\"T1\"}"), 10 * kItSlotBytes);  // kept
  const int status = daemon_->Stop(SIGTERM);
  EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
}

TEST_F(KvtierdMetricsTest, DemotionsAndPromotionsReachTheLatencyHistograms) {
  const std::string demote = "kvtier_transfer_seconds_count{direction=\"t1_to_t2\",op=\"demote\"}";
  const std::string promote =
      "kvtier_transfer_seconds_count{direction=\"t2_to_t1\",op=\"promote\"}";
  MetricsPage page = Scrape();
  EXPECT_EQ(page.Value(demote), 0);
  EXPECT_EQ(page.Value(promote), 0);
  EXPECT_FALSE(page.Get("kvtier_transfer_seconds_count{direction=\"t1_to_t0\",op=\"promote\"}"))
      << "no T0 configured";

  auto c = testing::ConnectTo(*daemon_, ItNamespace(), "moves");
  ASSERT_TRUE(c.ok()) << c.status();
  // 320 blocks into a 256-slot T1: the evictor writes the oldest down to T2.
  std::vector<std::vector<BlockKey>> chunks;
  for (uint32_t seed = 10; seed < 20; ++seed) {
    chunks.push_back(SeqKeys(**c, seed, 32));
    ASSERT_TRUE(testing::PutRetrying(**c, chunks.back()).ok());
  }
  ASSERT_TRUE(testing::Eventually([&] {
    MetricsPage p = Scrape();
    const double written = p.Value("kvtier_demotions_total{result=\"written\",tier=\"T1\"}");
    return p.Value(demote) > 0 && p.Value(demote) == written;  // one sample per T2 write
  })) << Scrape().Value(demote);
  EXPECT_GT(Scrape().Value("kvtier_transfer_seconds_sum{direction=\"t1_to_t2\",op=\"demote\"}"), 0);

  std::vector<bool> found;
  ASSERT_TRUE(testing::CheckFound(**c, chunks.front(), &found).ok());  // the oldest: in T2 now
  page = Scrape();
  const double promoted = page.Value("kvtier_get_blocks_total{result=\"promoted\"}");
  EXPECT_GT(promoted, 0);
  EXPECT_EQ(page.Value(promote), promoted);  // one client, one Get per block: one move each
  EXPECT_GT(page.Value("kvtier_transfer_seconds_sum{direction=\"t2_to_t1\",op=\"promote\"}"), 0);
  c->reset();
  const int status = daemon_->Stop(SIGTERM);
  EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
}

}  // namespace
}  // namespace kvtier
