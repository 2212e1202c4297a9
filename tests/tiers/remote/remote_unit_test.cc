// The remote tier's pieces that need no store: key slots, the value header, options validation,
// and the circuit breaker (alone, and as the tier's admission while a probe of a silent peer
// hangs).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/tiers/remote/fake_resp_server.h"
#include "tests/tiers/remote/redis_test_util.h"
#include "tiers/remote/circuit_breaker.h"
#include "tiers/remote/cluster_router.h"
#include "tiers/remote/remote_store_options.h"
#include "tiers/remote/remote_tier.h"
#include "tiers/remote/remote_value.h"

namespace kvtier {
namespace {

TEST(RemoteKeySlot, MatchesRedisKeyHashSlot) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the CRC16-XMODEM check value
  EXPECT_EQ(KeySlot("foo"), 12182);       // values Redis's CLUSTER KEYSLOT gives
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("{user1000}.followers"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), KeySlot("foo{}{bar}"));  // empty tag: the whole key
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));  // up to the first '}'
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
}

TEST(RemoteValue, RoundTripsAndRejectsEveryMismatch) {
  const BlockKey key{1, 2};
  BlockRecord record{key, 77, 5, 0x1234};
  std::string value(kRemoteHeaderBytes, '\0');
  EncodeRemoteHeader(record, reinterpret_cast<uint8_t*>(value.data()));
  value += "hello";
  absl::StatusOr<BlockRecord> got = DecodeRemoteHeader(value, key, 77);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->payload_bytes, 5u);
  EXPECT_EQ(got->checksum, 0x1234u);
  EXPECT_TRUE(absl::IsDataLoss(DecodeRemoteHeader(value, BlockKey{1, 3}, 77).status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeRemoteHeader(value, key, 78).status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeRemoteHeader(value.substr(0, 50), key, 77).status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeRemoteHeader(value + "x", key, 77).status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeRemoteHeader("short", key, 77).status()));
  std::string bad_magic = value;
  bad_magic[0] ^= 1;
  EXPECT_TRUE(absl::IsDataLoss(DecodeRemoteHeader(bad_magic, key, 77).status()));
  std::string bad_version = value;
  bad_version[4] = 2;
  EXPECT_TRUE(absl::IsDataLoss(DecodeRemoteHeader(bad_version, key, 77).status()));
}

TEST(RemoteOptions, ValidateNamesEveryBadSetting) {
  RemoteStoreOptions o;
  o.nodes = {"127.0.0.1:6379", "nohost", "127.0.0.1:6379"};
  o.cluster = ClusterMode::kStandalone;
  o.user = "kv";
  o.command_timeout_ms = 0;
  o.max_pipeline = 0;
  o.breaker_open_max_ms = 1;
  o.key_prefix = "{kv}:";
  const std::string m(o.Validate().message());
  for (const char* want :
       {"remote.nodes: a standalone store", "remote.nodes[1]: \"nohost\" is not host:port",
        "remote.nodes[2]: same as remote.nodes[0]", "remote.user: set without remote.password",
        "remote.command_timeout_ms: 0", "remote.max_pipeline: 0", "remote.breaker_open_max_ms: 1",
        "remote.key_prefix"}) {
    EXPECT_NE(m.find(want), std::string::npos) << want << " not in:\n" << m;
  }
  RemoteStoreOptions empty;
  EXPECT_NE(std::string(empty.Validate().message()).find("remote.nodes: at least one"),
            std::string::npos);
}

TEST(RemoteOptions, PasswordFileIsReadAndExclusiveWithPassword) {
  testing::RedisTempDir dir;
  const std::string path = dir.path() + "/pw";
  std::ofstream(path) << "s3cret\n";
  RemoteStoreOptions o;
  o.nodes = {"[::1]:7000"};
  o.user = "kv";
  o.password_file = path;
  ASSERT_TRUE(o.Validate().ok()) << o.Validate();
  absl::StatusOr<ClusterRouterOptions> r = o.RouterOptions();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->connection.password, "s3cret");
  EXPECT_EQ(r->seeds[0].host, "::1");
  o.password = "x";
  EXPECT_NE(std::string(o.Validate().message()).find("remote.password_file: set together"),
            std::string::npos);
  o.password.clear();
  o.password_file = dir.path() + "/missing";
  EXPECT_NE(std::string(o.Validate().message()).find("remote.password_file: "), std::string::npos);
}

// A probe in flight has not shown that the store is back, and every other call is refused while it
// runs: the breaker is not available until the probe succeeds (kvtierd's T3 admitted blocks on a
// probe's "available" and dropped them when their writes were refused).
TEST(RemoteBreaker, IsAvailableOnlyOnceAProbeSucceeds) {
  CircuitBreaker breaker(CircuitBreaker::Options{2, 1, 1000});
  EXPECT_TRUE(breaker.GetStats().available);
  breaker.Failure(absl::UnavailableError("down"));
  EXPECT_TRUE(breaker.GetStats().available);  // one failure of two
  breaker.Failure(absl::UnavailableError("down"));
  EXPECT_FALSE(breaker.GetStats().available);
  EXPECT_FALSE(breaker.Allow());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the 1 ms wait
  ASSERT_TRUE(breaker.Allow());                               // the probe
  EXPECT_FALSE(breaker.Allow());                              // anyone else while it runs
  EXPECT_FALSE(breaker.GetStats().available);
  breaker.Failure(absl::UnavailableError("still down"));  // a failed probe: open again (2 ms)
  EXPECT_FALSE(breaker.GetStats().available);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(breaker.Allow());
  EXPECT_FALSE(breaker.GetStats().available);
  breaker.Success();
  EXPECT_TRUE(breaker.GetStats().available);
  EXPECT_TRUE(breaker.Allow());
  const CircuitBreaker::Stats s = breaker.GetStats();
  EXPECT_EQ(s.opens, 1u);
  EXPECT_EQ(s.closes, 1u);
  EXPECT_EQ(s.refused, 2u);
}

// T3 on a peer that accepts connections and never answers: the first call times out and opens the
// breaker, then the tier's health thread probes and that probe hangs for command_timeout_ms. All
// the while the tier neither admits (the metric kvtier_tier_admitting reads this) nor hands out a
// slot: a block moved to it then would be refused by the breaker and dropped.
TEST(RemoteTierBreaker, AdmitsNothingWhileAProbeIsInFlight) {
  testing::FakeRespServer silent("", /*close_after=*/false);
  RemoteTierOptions o;
  o.store.nodes = {"127.0.0.1:" + std::to_string(silent.endpoint().port)};
  o.store.cluster = ClusterMode::kStandalone;
  o.store.connect_timeout_ms = 1000;
  o.store.command_timeout_ms = 1000;
  o.store.breaker_failures = 1;
  o.store.breaker_open_ms = 10;
  o.slot_bytes = 4096;
  o.capacity_bytes = 4096 * 16;
  o.threads = 1;
  auto tier = RemoteTier::Open(o);
  ASSERT_TRUE(tier.ok()) << tier.status();
  const BlockKey key{1, 2};
  RemoteOutcome present[1];
  EXPECT_FALSE((*tier)->store().Exists(absl::MakeConstSpan(&key, 1), absl::MakeSpan(present)).ok());
  ASSERT_EQ((*tier)->store().Stats().breaker.opens, 1u);
  // The health thread's probe starts within ~20 ms and hangs for a second: look for 400 ms.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
  int admitted = 0, looks = 0;
  while (std::chrono::steady_clock::now() < until) {
    ++looks;
    if ((*tier)->Stats().admitting) ++admitted;
    absl::StatusOr<SlotId> slot = (*tier)->Allocate();
    if (slot.ok()) {
      ++admitted;
      (*tier)->Free(*slot);
    } else {
      EXPECT_TRUE(absl::IsUnavailable(slot.status())) << slot.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(admitted, 0) << "of " << looks << " looks";
  EXPECT_EQ((*tier)->Stats().used_slots, 0u);
}

}  // namespace
}  // namespace kvtier
