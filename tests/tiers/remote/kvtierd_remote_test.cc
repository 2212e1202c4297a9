// kvtierd with a remote tier (T3) on real redis-server processes: two daemons sharing a key-scope
// secret on a 3-master, 3-replica Redis Cluster share blocks through it (another namespace finds
// none of them); T2's victims reach the store through a staging buffer; a master killed mid-load
// never makes a daemon serve a wrong byte; a value corrupted in the store is a counted miss; and a
// daemon started while the store is down serves T1 and picks T3 up once the store is back.
//
// The daemons run with a small T1 and no T2, so a prefix stored through one reaches the store
// once filler blocks push it out of T1 (T1's victims go to T3 when there is no T2).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/key_scope.h"
#include "index/namespace.h"
#include "tests/daemon/kvtierd_test_util.h"
#include "tests/tiers/remote/kvtierd_remote_test_util.h"
#include "tiers/remote/remote_store.h"

namespace kvtier::testing {
namespace {

TEST_F(KvtierdRemoteTest, TwoDaemonsShareAPrefixByteForByteAndAnotherNamespaceFindsNone) {
  StartCluster();
  auto first = StartRemoteDaemon("a", cluster_->addresses());
  auto second = StartRemoteDaemon("b", {cluster_->addresses()[3]});  // another seed
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  auto writer = ConnectTo(*first, ItNamespace(), "writer");
  auto reader = ConnectTo(*second, ItNamespace(), "reader");
  ASSERT_TRUE(writer.ok() && reader.ok());
  const std::vector<BlockKey> prefix = SeqKeys(**writer, 1, 24);
  ASSERT_TRUE(PutRetrying(**writer, prefix).ok());
  PushOutOfT1(**writer);
  ASSERT_TRUE(WaitForPrefix(**reader, prefix)) << first->Log() << second->Log();
  auto looked = (*reader)->Lookup(prefix);
  ASSERT_TRUE(looked.ok());
  for (size_t i = 0; i < prefix.size(); ++i) {
    EXPECT_NE(looked->tiers[i] & TierBit(Tier::kT3), 0) << "block " << i;
  }
  EXPECT_TRUE(CheckAll(**reader, prefix).ok()) << second->Log();
  // Once read, the second daemon holds the blocks in T1 too.
  looked = (*reader)->Lookup(prefix);
  ASSERT_TRUE(looked.ok());
  EXPECT_EQ(looked->hit_blocks, prefix.size());
  EXPECT_NE(looked->tiers[0] & TierBit(Tier::kT1), 0);
  // The same client keys under another namespace (cache salt) scope to other daemon keys: a
  // client of it finds nothing of the prefix, in any daemon's tiers or in the store.
  auto other = ConnectTo(*second, ItNamespace("tenant-b"), "other");
  ASSERT_TRUE(other.ok());
  auto elsewhere = (*other)->Lookup(SeqKeys(**other, 1, 24));
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(elsewhere->hit_blocks, 0u);
  // A third daemon's client gets the prefix without a lookup first.
  auto third = StartRemoteDaemon("c", {cluster_->addresses()[5]});
  ASSERT_NE(third, nullptr);
  auto getter = ConnectTo(*third, ItNamespace(), "getter");
  ASSERT_TRUE(getter.ok());
  EXPECT_TRUE(CheckAll(**getter, prefix).ok()) << third->Log();
}

// With a T2, T1's victims go to NVMe and T2's to the store: the move between two tiers that are not
// host memory goes through a staging buffer (the mover's), and the blocks arrive whole.
TEST_F(KvtierdRemoteTest, T2VictimsReachTheStoreThroughAStagingBuffer) {
  auto server = RedisServer::Start(redis_dir_.path() + "/standalone", {});
  ASSERT_TRUE(server.ok()) << server.status();
  int port = 0;
  auto first = StartRemoteDaemon(
      "a", {(*server)->address()},
      {"--t2.enabled", "true", "--t2.capacity_bytes", std::to_string(kT1Slots * kItSlotBytes)},
      &port);
  auto second = StartRemoteDaemon("b", {(*server)->address()});
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  auto writer = ConnectTo(*first, ItNamespace(), "writer");
  auto reader = ConnectTo(*second, ItNamespace(), "reader");
  ASSERT_TRUE(writer.ok() && reader.ok());
  const std::vector<BlockKey> prefix = SeqKeys(**writer, 3, 16);
  ASSERT_TRUE(PutRetrying(**writer, prefix).ok());
  PushOutOfT1(**writer);  // 3 x T1's slots: through T1 (64) and T2 (64) into the store
  ASSERT_TRUE(WaitForPrefix(**reader, prefix)) << first->Log();
  EXPECT_TRUE(CheckAll(**reader, prefix).ok()) << second->Log();
  EXPECT_GT(Metric(port, "kvtier_demotions_total{result=\"written\",tier=\"T2\"}"), 0);
  EXPECT_GT(Metric(port, "kvtier_transfer_seconds_count{direction=\"t2_to_t3\",op=\"demote\"}"), 0);
}

// Readers go on while a master is SIGKILLed: blocks on its slots fail (misses) until its replica
// takes over; every block that is served is whole; afterwards the tier serves again.
TEST_F(KvtierdRemoteTest, AMasterKilledMidLoadServesNoWrongByteAndTheTierServesAfterFailover) {
  StartCluster();
  auto first = StartRemoteDaemon("a", cluster_->addresses());
  ASSERT_NE(first, nullptr);
  auto writer = ConnectTo(*first, ItNamespace(), "writer");
  ASSERT_TRUE(writer.ok());
  std::vector<std::vector<BlockKey>> prefixes;
  for (uint32_t p = 0; p < 8; ++p) {
    prefixes.push_back(SeqKeys(**writer, 10 + p, 12));
    ASSERT_TRUE(PutRetrying(**writer, prefixes.back()).ok());
  }
  PushOutOfT1(**writer);
  // Each prefix is read by a daemon of its own, so every read goes to the store.
  std::vector<KvtierdProcess*> readers;
  for (uint32_t p = 0; p < prefixes.size(); ++p) {
    readers.push_back(StartRemoteDaemon("r" + std::to_string(p), cluster_->addresses()));
    ASSERT_NE(readers.back(), nullptr);
  }
  auto probe = ConnectTo(*readers[0], ItNamespace(), "probe");
  ASSERT_TRUE(probe.ok());
  ASSERT_TRUE(WaitForPrefix(**probe, prefixes[0])) << first->Log();
  // The load: a thread reading one prefix after another while the main thread kills a master.
  std::atomic<size_t> read_prefixes{0}, served{0}, missed{0};
  std::vector<std::string> wrong;  // the load thread's; read after join
  std::thread load([&] {
    for (size_t p = 0; p < prefixes.size(); ++p) {
      auto reader = ConnectTo(*readers[p], ItNamespace(), "reader");
      if (!reader.ok()) {
        wrong.push_back("prefix " + std::to_string(p) + ": " + reader.status().ToString());
        continue;
      }
      (void)(*reader)->Lookup(prefixes[p]);  // finds what the store answers for
      std::vector<bool> found;
      const absl::Status whole = CheckFound(**reader, prefixes[p], &found);
      if (!whole.ok()) wrong.push_back("prefix " + std::to_string(p) + ": " + whole.ToString());
      for (bool f : found) (f ? served : missed) += 1;
      ++read_prefixes;
    }
  });
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_prefixes.load() < 2 && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cluster_->server(0).Kill();  // a master, mid-load
  load.join();
  for (const std::string& w : wrong) ADD_FAILURE() << w;
  EXPECT_GT(served.load(), 0u);
  ASSERT_TRUE(cluster_->WaitHealthy(std::chrono::seconds(60)).ok());
  // After the failover a new prefix goes through the store whole.
  const std::vector<BlockKey> after = SeqKeys(**writer, 30, 16);
  ASSERT_TRUE(PutRetrying(**writer, after).ok());
  PushOutOfT1(**writer);
  auto last = StartRemoteDaemon("after", {cluster_->addresses()[1]});
  ASSERT_NE(last, nullptr);
  auto reader = ConnectTo(*last, ItNamespace(), "reader");
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(WaitForPrefix(**reader, after)) << first->Log() << last->Log();
  EXPECT_TRUE(CheckAll(**reader, after).ok()) << last->Log();
  std::cerr << "blocks served while a master died: " << served.load()
            << ", missed: " << missed.load() << "\n";
}

// A value changed in the store (here: stored with a checksum its payload does not have) is
// found by a lookup, but its get is a miss, counted, and no byte of it is served.
TEST_F(KvtierdRemoteTest, AValueCorruptedInTheStoreIsACountedMiss) {
  auto server = RedisServer::Start(redis_dir_.path() + "/standalone", {});
  ASSERT_TRUE(server.ok()) << server.status();
  int port = 0;
  auto daemon = StartRemoteDaemon("a", {(*server)->address()}, {}, &port);
  ASSERT_NE(daemon, nullptr);
  auto c = ConnectTo(*daemon, ItNamespace(), "client");
  ASSERT_TRUE(c.ok());
  const std::vector<BlockKey> keys = SeqKeys(**c, 40, 1);
  // The value the daemon would read for keys[0]: its daemon key, under the fleet's secret.
  auto scope = KeyScope::Load(secret_, /*must_exist=*/true);
  ASSERT_TRUE(scope.ok()) << scope.status();
  const BlockKey root = NamespaceRoot(ItNamespace());
  RemoteStoreOptions options;
  options.nodes = {(*server)->address()};
  auto store = RemoteStore::Open(options);
  ASSERT_TRUE(store.ok());
  const std::vector<std::byte> payload = Payload(keys[0]);
  RemotePutItem item;
  item.record = BlockRecord{scope->Scope(root, keys[0]), root.lo,
                            static_cast<uint32_t>(payload.size()), 0x1234};  // not its checksum
  item.payload = payload.data();
  ASSERT_TRUE((*store)->Put(absl::MakeSpan(&item, 1)).ok());
  auto looked = (*c)->Lookup(keys);
  ASSERT_TRUE(looked.ok());
  ASSERT_EQ(looked->hit_blocks, 1u);  // the store holds a value of that key
  EXPECT_EQ(looked->tiers[0], TierBit(Tier::kT3));
  auto got = (*c)->Get(keys);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].code, static_cast<uint32_t>(BlockCode::kMissing));
  EXPECT_EQ(Metric(port, "kvtier_remote_blocks_total{result=\"corrupt\",tier=\"T3\"}"), 1)
      << daemon->Log();
  EXPECT_EQ(Metric(port, "kvtier_checksum_failures_total{tier=\"T3\"}"), 1);
}

// A daemon whose store is down when it starts serves T1 as ever; once the store is up, T1's
// victims reach it and come back from it.
TEST_F(KvtierdRemoteTest, AStoreDownAtStartIsPickedUpWhenItComesBack) {
  const uint16_t store_port = PickRedisPort();
  int port = 0;
  auto daemon = StartRemoteDaemon("a", {"127.0.0.1:" + std::to_string(store_port)}, {}, &port);
  ASSERT_NE(daemon, nullptr);
  auto c = ConnectTo(*daemon, ItNamespace(), "client");
  ASSERT_TRUE(c.ok());
  const std::vector<BlockKey> early = SeqKeys(**c, 50, 8);
  ASSERT_TRUE(PutRetrying(**c, early).ok());
  EXPECT_TRUE(CheckAll(**c, early).ok());  // T1 serves
  PushOutOfT1(**c);                        // victims have nowhere to go: dropped
  ASSERT_TRUE(WaitForMetric(port, "kvtier_tier_admitting{tier=\"T3\"}", 0)) << daemon->Log();
  auto server = RedisServer::Start(redis_dir_.path() + "/late", {}, store_port);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(WaitForMetric(port, "kvtier_tier_admitting{tier=\"T3\"}", 1)) << daemon->Log();
  const std::vector<BlockKey> late = SeqKeys(**c, 51, 8);
  ASSERT_TRUE(PutRetrying(**c, late).ok());
  PushOutOfT1(**c);
  ASSERT_TRUE(WaitForPrefix(**c, late)) << daemon->Log();
  auto looked = (*c)->Lookup(late);
  ASSERT_TRUE(looked.ok());
  EXPECT_NE(looked->tiers[0] & TierBit(Tier::kT3), 0);
  EXPECT_TRUE(CheckAll(**c, late).ok()) << daemon->Log();
}

}  // namespace
}  // namespace kvtier::testing
