// RemoteStore against real standalone redis-server processes: round trips, verification of what
// the store hands back, the store's own eviction, ACL AUTH, and the circuit breaker.
#include <gtest/gtest.h>
#include <hiredis.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/tiers/remote/remote_store_test_util.h"

namespace kvtier::testing {
namespace {

class RemoteStandaloneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = RedisSkipReason();
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  // Starts a server in the temp dir with these config lines.
  void StartServer(std::vector<std::string> config = {}) {
    auto s = RedisServer::Start(dir_.path() + "/standalone", std::move(config));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  std::unique_ptr<RemoteStore> OpenStore(RemoteStoreOptions options) {
    auto store = RemoteStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  RedisTempDir dir_;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RemoteStandaloneTest, RoundTripsEveryByteAtSeveralSizes) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto store = OpenStore(TestStoreOptions({server_->address()}));
  uint64_t salt = 1;
  for (size_t bytes : {size_t{4096}, size_t{256} << 10, size_t{2} << 20}) {
    const std::vector<BlockKey> keys = TestKeys(8, salt++);
    ASSERT_TRUE(PutPattern(*store, keys, bytes).ok());
    GetTally t = GetAndCheck(*store, keys, bytes);
    ASSERT_TRUE(t.status.ok()) << t.status;
    EXPECT_EQ(t.hits, keys.size()) << bytes;
    EXPECT_EQ(t.wrong, 0u);
  }
  const RemoteStoreStats s = store->Stats();
  EXPECT_EQ(s.stored, 24u);
  EXPECT_EQ(s.hits, 24u);
  EXPECT_EQ(s.bytes_written, 8u * (4096 + (256 << 10) + (2 << 20)));
  EXPECT_EQ(s.bytes_read, s.bytes_written);
  EXPECT_FALSE(s.router.cluster);
  EXPECT_EQ(s.router.nodes_up, 1u);
  EXPECT_EQ(s.get_latency.count, 3u);
}

TEST_F(RemoteStandaloneTest, AbsentKeysMissAndExistsAndDeleteAgree) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto store = OpenStore(TestStoreOptions({server_->address()}));
  const std::vector<BlockKey> keys = TestKeys(6, 9);
  ASSERT_TRUE(PutPattern(*store, {keys[0], keys[1], keys[2]}, 1000).ok());
  std::vector<RemoteOutcome> present(keys.size());
  ASSERT_TRUE(store->Exists(keys, absl::MakeSpan(present)).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(present[i], i < 3 ? RemoteOutcome::kHit : RemoteOutcome::kMiss) << i;
  }
  ASSERT_TRUE(store->Delete({keys[1], keys[4]}).ok());
  GetTally t = GetAndCheck(*store, keys, 1000);
  EXPECT_TRUE(t.status.ok()) << t.status;
  EXPECT_EQ(t.hits, 2u);
  EXPECT_EQ(t.misses, 4u);
  EXPECT_EQ(store->Stats().corrupt_values, 0u);
}

TEST_F(RemoteStandaloneTest, CorruptShortOrForeignValuesAreCountedMissesNeverServed) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto store = OpenStore(TestStoreOptions({server_->address()}));
  const std::vector<BlockKey> keys = TestKeys(5, 3);
  ASSERT_TRUE(PutPattern(*store, keys, 256 << 10).ok());
  auto raw = server_->Connect();
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto get = [&](const BlockKey& k) {
    const std::string key = store->StoreKey(k);
    auto reply = (*raw)->Command({"GET", key});
    EXPECT_TRUE(reply.ok());
    return std::string((*reply)->str, (*reply)->len);
  };
  auto set = [&](const BlockKey& k, const std::string& value) {
    const std::string key = store->StoreKey(k);
    auto reply = (*raw)->Command({"SET", key, value});
    ASSERT_TRUE(reply.ok());
  };
  std::string flipped = get(keys[0]);
  flipped[flipped.size() / 2] ^= 0x40;  // one payload bit
  set(keys[0], flipped);
  set(keys[1], "odd");                           // shorter than a header
  set(keys[2], get(keys[3]));                    // another key's whole value
  set(keys[3], get(keys[3]).substr(0, 100000));  // truncated
  GetTally t = GetAndCheck(*store, keys, 256 << 10);
  EXPECT_TRUE(t.status.ok()) << t.status;
  EXPECT_EQ(t.hits, 1u);
  EXPECT_EQ(t.misses, 4u);
  EXPECT_EQ(t.wrong, 0u);
  EXPECT_EQ(store->Stats().corrupt_values, 4u);
}

TEST_F(RemoteStandaloneTest, APayloadThatFailsItsChecksumIsRefusedOrNeverServed) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  std::vector<uint8_t> payload(4096, 7);
  RemotePutItem item;
  item.record = BlockRecord{BlockKey{5, 5}, kTestNamespace, 4096, 0xdeadbeef};
  item.payload = payload.data();
  // verify_puts: refused before it reaches the store.
  RemoteStoreOptions verifying = TestStoreOptions({server_->address()});
  verifying.verify_puts = true;
  auto store = OpenStore(verifying);
  EXPECT_TRUE(absl::IsDataLoss(store->Put(absl::MakeSpan(&item, 1))));
  EXPECT_EQ(item.outcome, RemoteOutcome::kError);
  EXPECT_EQ(GetAndCheck(*store, {BlockKey{5, 5}}, 4096).misses, 1u);
  EXPECT_EQ(store->Stats().errors_bad_put, 1u);
  // Without: stored as given, and a reader counts it corrupt and misses.
  auto trusting = OpenStore(TestStoreOptions({server_->address()}));
  ASSERT_TRUE(trusting->Put(absl::MakeSpan(&item, 1)).ok());
  GetTally t = GetAndCheck(*trusting, {BlockKey{5, 5}}, 4096);
  EXPECT_EQ(t.misses, 1u);
  EXPECT_EQ(t.hits, 0u);
  EXPECT_EQ(trusting->Stats().corrupt_values, 1u);
}

TEST_F(RemoteStandaloneTest, TheStoreEvictsUnderMaxmemoryAndEvictedKeysMiss) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"maxmemory 8mb", "maxmemory-policy allkeys-lru"}));
  auto store = OpenStore(TestStoreOptions({server_->address()}));
  const std::vector<BlockKey> keys = TestKeys(96, 4);  // 24 MiB into 8 MiB
  for (size_t at = 0; at < keys.size(); at += 8) {
    std::vector<BlockKey> batch(keys.begin() + at, keys.begin() + at + 8);
    ASSERT_TRUE(PutPattern(*store, batch, 256 << 10).ok());
  }
  GetTally t = GetAndCheck(*store, keys, 256 << 10);
  EXPECT_TRUE(t.status.ok()) << t.status;
  EXPECT_GT(t.misses, 48u);  // at most 8 MiB of 24 can be left
  EXPECT_GT(t.hits, 0u);
  EXPECT_EQ(t.wrong, 0u);
  EXPECT_EQ(store->Stats().corrupt_values, 0u);
}

TEST_F(RemoteStandaloneTest, AclUserWithTheRightPasswordWorksAndAWrongOneIsAClearError) {
  ASSERT_NO_FATAL_FAILURE(
      StartServer({"user default off",  // the least-privilege user docs/configuration.md shows
                   "user kvtier on >s3cret ~kvtier:* +@read +@write +@keyspace +cluster|slots "
                   "+ping +asking"}));
  RemoteStoreOptions good = TestStoreOptions({server_->address()});
  good.user = "kvtier";
  good.password = "s3cret";
  auto store = OpenStore(good);
  const std::vector<BlockKey> keys = TestKeys(2, 5);
  ASSERT_TRUE(PutPattern(*store, keys, 4096).ok());
  EXPECT_EQ(GetAndCheck(*store, keys, 4096).hits, 2u);

  RemoteStoreOptions bad = good;
  bad.password = "wrong";
  auto refused = OpenStore(bad);
  const absl::Status status = PutPattern(*refused, keys, 4096);
  EXPECT_TRUE(absl::IsUnauthenticated(status)) << status;
  const std::string m(status.message());
  EXPECT_NE(m.find(server_->address()), std::string::npos) << m;
  EXPECT_NE(m.find("AUTH as user 'kvtier' refused"), std::string::npos) << m;
  EXPECT_EQ(m.find("wrong"), std::string::npos) << "the password must not be in messages: " << m;
  EXPECT_EQ(refused->Stats().errors_auth, keys.size());
}

TEST_F(RemoteStandaloneTest, AStoreDownAtStartOpensTheBreakerAndIsPickedUpWhenItComesBack) {
  const uint16_t port = PickRedisPort();
  auto store = OpenStore(TestStoreOptions({"127.0.0.1:" + std::to_string(port)}));
  const std::vector<BlockKey> keys = TestKeys(4, 6);
  // Every call fails; after breaker_failures (3) in a row the breaker opens and calls fail fast.
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(PutPattern(*store, keys, 4096).ok());
  RemoteStoreStats s = store->Stats();
  EXPECT_EQ(s.breaker.opens, 1u);
  EXPECT_GT(s.breaker.refused, 0u);
  EXPECT_FALSE(s.breaker.available);
  EXPECT_GT(s.errors_connection, 0u);
  GetTally down = GetAndCheck(*store, keys, 4096);
  EXPECT_EQ(down.errors, keys.size());

  auto server = RedisServer::Start(dir_.path() + "/late", {}, port);
  ASSERT_TRUE(server.ok()) << server.status();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  absl::Status put = absl::UnknownError("not tried");
  while (!put.ok() && std::chrono::steady_clock::now() < deadline) {
    put = PutPattern(*store, keys, 4096);
    if (!put.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_EQ(GetAndCheck(*store, keys, 4096).hits, keys.size());
  s = store->Stats();
  EXPECT_TRUE(s.breaker.available);
  EXPECT_EQ(s.breaker.closes, 1u);
}

TEST_F(RemoteStandaloneTest, AStoreThatHangsTimesOutOpensTheBreakerAndComesBack) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  RemoteStoreOptions options = TestStoreOptions({server_->address()});
  options.command_timeout_ms = 200;
  auto store = OpenStore(options);
  const std::vector<BlockKey> keys = TestKeys(4, 7);
  ASSERT_TRUE(PutPattern(*store, keys, 4096).ok());
  server_->Pause();  // connections stay open; nothing answers
  for (int i = 0; i < 5; ++i) {
    const GetTally t = GetAndCheck(*store, keys, 4096);
    EXPECT_EQ(t.errors, keys.size());
    EXPECT_EQ(t.hits, 0u);
  }
  RemoteStoreStats s = store->Stats();
  EXPECT_GT(s.errors_timeout, 0u);
  EXPECT_EQ(s.breaker.opens, 1u);
  EXPECT_GT(s.breaker.refused, 0u);
  server_->Resume();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  GetTally t;
  while (t.hits != keys.size() && std::chrono::steady_clock::now() < deadline) {
    t = GetAndCheck(*store, keys, 4096);
    if (t.hits != keys.size()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(t.hits, keys.size()) << t.status;
  EXPECT_EQ(t.wrong, 0u);
  EXPECT_TRUE(store->Stats().breaker.available);
}

}  // namespace
}  // namespace kvtier::testing
