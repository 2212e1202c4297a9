// RemoteStore against a real 3-master, 3-replica Redis Cluster made by `redis-cli --cluster
// create`: blocks stored through one store are read back whole through another, redirects are
// followed while a slot migrates, and a master killed mid-load fails only calls in flight, never
// serves a wrong byte, and the store serves again after the failover.
#include <gtest/gtest.h>
#include <hiredis.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/tiers/remote/remote_store_test_util.h"

namespace kvtier::testing {
namespace {

using Clock = std::chrono::steady_clock;

class RemoteClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = RedisSkipReason();
    if (!skip.empty()) GTEST_SKIP() << skip;
    auto cluster = RedisCluster::Start(dir_.path());
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
  }
  std::unique_ptr<RemoteStore> OpenStore(std::vector<std::string> seeds) {
    RemoteStoreOptions options = TestStoreOptions(std::move(seeds));
    options.cluster = ClusterMode::kCluster;
    auto store = RemoteStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  std::string Text(size_t server, std::vector<std::string_view> args) {
    auto c = cluster_->server(server).Connect();
    EXPECT_TRUE(c.ok()) << c.status();
    auto reply = (*c)->Command(args);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return std::string((*reply)->str == nullptr ? "" : (*reply)->str, (*reply)->len);
  }
  int64_t Integer(size_t server, std::vector<std::string_view> args) {
    auto c = cluster_->server(server).Connect();
    auto reply = (*c)->Command(args);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return (*reply)->integer;
  }

  RedisTempDir dir_;
  std::unique_ptr<RedisCluster> cluster_;
};

TEST_F(RemoteClusterTest, APutThroughOneStoreIsReadWholeThroughAnother) {
  auto writer = OpenStore({cluster_->addresses()[0]});
  auto reader = OpenStore({cluster_->addresses()[4]});  // another seed, a separate instance
  const std::vector<BlockKey> keys = TestKeys(48, 11);
  ASSERT_TRUE(PutPattern(*writer, keys, 256 << 10).ok());
  GetTally t = GetAndCheck(*reader, keys, 256 << 10);
  ASSERT_TRUE(t.status.ok()) << t.status;
  EXPECT_EQ(t.hits, keys.size());
  EXPECT_EQ(t.wrong, 0u);
  const RouterStats r = reader->Stats().router;
  EXPECT_TRUE(r.cluster);
  EXPECT_EQ(r.nodes_serving, 3u);
  EXPECT_EQ(r.nodes_up, 3u);
  for (size_t i = 0; i < 8; ++i) {  // our slot is the cluster's
    const std::string key = writer->StoreKey(keys[i]);
    EXPECT_EQ(Integer(0, {"CLUSTER", "KEYSLOT", key}), KeySlot(key));
  }
}

TEST_F(RemoteClusterTest, AskAndMovedRedirectsAreFollowedWhileASlotMigrates) {
  auto store = OpenStore({cluster_->addresses()[0]});
  const BlockKey key{42, 42};
  ASSERT_TRUE(PutPattern(*store, {key}, 4096).ok());
  const uint32_t slot = KeySlot(store->StoreKey(key));
  auto from = cluster_->MasterOf(slot);
  ASSERT_TRUE(from.ok()) << from.status();
  size_t to = *from;
  for (uint32_t s : {0u, 8000u, 16000u}) {
    auto m = cluster_->MasterOf(s);
    if (m.ok() && *m != *from) to = *m;
  }
  ASSERT_NE(to, *from);
  const std::string from_id = Text(*from, {"CLUSTER", "MYID"});
  const std::string to_id = Text(to, {"CLUSTER", "MYID"});
  const std::string slot_text = std::to_string(slot);
  const std::string to_port = std::to_string(cluster_->server(to).port());
  EXPECT_EQ(Text(to, {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", from_id}), "OK");
  EXPECT_EQ(Text(*from, {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", to_id}), "OK");
  const std::string store_key = store->StoreKey(key);
  EXPECT_EQ(Text(*from, {"MIGRATE", "127.0.0.1", to_port, "", "0", "10000", "KEYS", store_key}),
            "OK");

  GetTally asked = GetAndCheck(*store, {key}, 4096);  // the old owner answers ASK
  EXPECT_EQ(asked.hits, 1u) << asked.status;
  EXPECT_EQ(store->Stats().router.ask_redirects, 1u);

  for (size_t node : {to, *from}) {
    EXPECT_EQ(Text(node, {"CLUSTER", "SETSLOT", slot_text, "NODE", to_id}), "OK");
  }
  GetTally moved = GetAndCheck(*store, {key}, 4096);  // the old owner answers MOVED
  EXPECT_EQ(moved.hits, 1u) << moved.status;
  EXPECT_EQ(moved.wrong, 0u);
  EXPECT_GE(store->Stats().router.moved_redirects, 1u);
}

// Reads the same keys again and again on its own thread, checking every byte of every hit.
class Reader {
 public:
  Reader(RemoteStore& store, std::vector<BlockKey> keys, size_t bytes)
      : store_(store), keys_(std::move(keys)), bytes_(bytes), thread_([this] { Loop(); }) {}
  ~Reader() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::atomic<size_t> rounds{0}, hits{0}, misses{0}, errors{0}, wrong{0};

 private:
  void Loop() {
    while (!stop_) {
      GetTally t = GetAndCheck(store_, keys_, bytes_);
      hits += t.hits;
      misses += t.misses;
      errors += t.errors;
      wrong += t.wrong;
      ++rounds;
    }
  }
  RemoteStore& store_;
  const std::vector<BlockKey> keys_;
  const size_t bytes_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(RemoteClusterTest, AMasterKilledMidLoadNeverServesAWrongByteAndServesAgainAfterFailover) {
  constexpr size_t kBytes = 64 << 10;
  auto writer = OpenStore(cluster_->addresses());
  auto read_store = OpenStore(cluster_->addresses());
  const std::vector<BlockKey> keys = TestKeys(64, 21);
  ASSERT_TRUE(PutPattern(*writer, keys, kBytes).ok());
  ASSERT_TRUE(cluster_->WaitHealthy(std::chrono::seconds(60)).ok());  // replicas have them

  Reader reader(*read_store, keys, kBytes);
  const auto loaded = Clock::now() + std::chrono::seconds(60);
  while (reader.rounds < 3 && Clock::now() < loaded) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto victim = cluster_->MasterOf(KeySlot(writer->StoreKey(keys[0])));
  ASSERT_TRUE(victim.ok()) << victim.status();
  const size_t errors_before = reader.errors;
  cluster_->server(*victim).Kill();  // SIGKILL, mid-load

  // Puts go on during the failover: each either stores or fails; none may corrupt anything.
  uint64_t salt = 100;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  bool served_again = false;
  while (!served_again && Clock::now() < deadline) {
    const std::vector<BlockKey> fresh = TestKeys(32, salt++);
    if (PutPattern(*writer, fresh, kBytes).ok()) {
      GetTally t = GetAndCheck(*read_store, fresh, kBytes);
      EXPECT_EQ(t.wrong, 0u);
      served_again = t.status.ok() && t.hits == fresh.size();
    }
    if (!served_again) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reader.Stop();
  EXPECT_TRUE(served_again) << "no whole round after the failover";
  EXPECT_EQ(reader.wrong, 0u);
  EXPECT_GT(reader.errors, errors_before) << "the dead master's keys should have failed a while";
  ASSERT_TRUE(cluster_->WaitHealthy(std::chrono::seconds(60)).ok());  // a replica took over
  GetTally after = GetAndCheck(*read_store, keys, kBytes);            // replicated before the kill
  EXPECT_TRUE(after.status.ok()) << after.status;
  EXPECT_EQ(after.wrong, 0u);
  EXPECT_EQ(after.hits + after.misses, keys.size());
  EXPECT_GE(writer->Stats().router.map_refreshes, 2u);
  const RouterStats router = read_store->Stats().router;  // the promoted replica replaced the dead
  EXPECT_EQ(router.nodes_serving, 3u);
  EXPECT_EQ(router.nodes_up, 3u);
}

}  // namespace
}  // namespace kvtier::testing
