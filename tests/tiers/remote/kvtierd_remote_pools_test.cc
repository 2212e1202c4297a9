// Memory pools and the remote tier (docs/configuration.md "Memory pools", T3): two daemons of one
// fleet, each with pools a and b, on one real redis-server. The store is shared, the pools' blocks
// are not: pool a of one daemon finds pool a's prefix of the other through the store, while pool b,
// with the same namespace and the same client keys, finds none of it (its keys are scoped by its
// pool's name).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/daemon/kvtierd_test_util.h"
#include "tests/tiers/remote/kvtierd_remote_test_util.h"

namespace kvtier::testing {
namespace {

absl::StatusOr<std::unique_ptr<client::Client>> ConnectToPool(const KvtierdProcess& d,
                                                              const std::string& pool) {
  client::ClientOptions options{d.socket_path(), ItNamespace(), "pool-" + pool};
  options.pool = pool;  // root may use every pool, and names one
  return client::Client::Connect(options);
}

TEST_F(KvtierdRemoteTest, APoolsBlocksInTheStoreAreFoundByThatPoolOnly) {
  auto server = RedisServer::Start(redis_dir_.path() + "/standalone", {});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string pool_bytes = std::to_string(kT1Slots * kItSlotBytes);
  const std::vector<std::string> pools = {
      "--t1.capacity_bytes", std::to_string(2 * kT1Slots * kItSlotBytes), "--pools",
      "[{name = \"a\", users = [65534], t1_capacity_bytes = " + pool_bytes +
          "}, {name = \"b\", users = [64711], t1_capacity_bytes = " + pool_bytes + "}]"};
  auto first = StartRemoteDaemon("one", {(*server)->address()}, pools);
  auto second = StartRemoteDaemon("two", {(*server)->address()}, pools);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  auto writer = ConnectToPool(*first, "a");
  auto reader = ConnectToPool(*second, "a");
  ASSERT_TRUE(writer.ok() && reader.ok());
  const std::vector<BlockKey> prefix = SeqKeys(**writer, 1, 16);
  ASSERT_TRUE(PutRetrying(**writer, prefix).ok());
  PushOutOfT1(**writer);  // pool a's T1 is kT1Slots: its victims go to the store
  ASSERT_TRUE(WaitForPrefix(**reader, prefix)) << first->Log() << second->Log();
  EXPECT_TRUE(CheckAll(**reader, prefix).ok()) << second->Log();
  // The prefix is in the store now; pool b, same namespace and keys, asks for other keys.
  for (KvtierdProcess* d : {first, second}) {
    auto other = ConnectToPool(*d, "b");
    ASSERT_TRUE(other.ok()) << other.status();
    auto looked = (*other)->Lookup(prefix);
    ASSERT_TRUE(looked.ok()) << looked.status();
    EXPECT_EQ(looked->hit_blocks, 0u) << d->Log();
    std::vector<bool> found;
    ASSERT_TRUE(CheckFound(**other, prefix, &found).ok());
    EXPECT_EQ(found, std::vector<bool>(prefix.size(), false));
  }
}

}  // namespace
}  // namespace kvtier::testing
