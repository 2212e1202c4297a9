// The remote tier (T3) as a rung of a real tier manager, in one process, on a real redis-server:
// T1's victims are written to the store and come back whole under concurrent gets (promotions
// joined and racing evictions), and a second manager on the same store finds them through a
// lookup's probe (ExtendPrefix). In one process, so ThreadSanitizer sees the mover and the remote
// tier's threads together (kvtierd itself does not build under TSan: Boost.Asio's fences).
#include "tiers/remote/remote_tier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "tests/tiers/remote/redis_test_util.h"
#include "tiers/tier_manager.h"

namespace kvtier::testing {
namespace {

constexpr uint32_t kSlot = 64 << 10;
constexpr uint64_t kNamespace = 5;

BlockKey Key(uint64_t i) { return BlockKey{i * 0x9E3779B97F4A7C15ull + 1, i ^ 0xABCDEFull}; }
uint32_t Bytes(uint64_t i) { return i % 3 == 0 ? kSlot : 1000 + static_cast<uint32_t>(i) * 97; }
void Fill(uint64_t i, std::byte* out) { FillPattern(Key(i), out, Bytes(i)); }

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = RedisSkipReason();
    if (!skip.empty()) GTEST_SKIP() << skip;
    auto server = RedisServer::Start(dir_.path(), {});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // T1 of `t1_slots` slots shedding from 75% to 50%, no T2, T3 on the server.
  std::unique_ptr<TierManager> Manager(uint32_t t1_slots) {
    TierManagerOptions o;
    o.t1.capacity_bytes = uint64_t{kSlot} * t1_slots;
    o.t1.slot_bytes = kSlot;
    o.t1.dma_chunk_bytes = kSlot;
    o.t1.touch_threads = 1;
    o.t1.huge_pages = HugePages::kOff;
    o.t1_policy.high_watermark = 0.75;
    o.t1_policy.low_watermark = 0.5;
    RemoteTierOptions r;
    r.store.nodes = {server_->address()};
    r.store.cluster = ClusterMode::kStandalone;
    r.slot_bytes = kSlot;
    r.capacity_bytes = uint64_t{kSlot} * 256;
    r.lookup_budget_us = 1000000;
    auto tier = RemoteTier::Open(r);
    EXPECT_TRUE(tier.ok()) << tier.status();
    o.t3 = std::move(*tier);
    auto m = TierManager::Create(o);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }

  static absl::Status Put(TierManager& m, uint64_t i) {
    absl::StatusOr<SlotId> slot = m.AllocateForPut();
    for (int tries = 0; !slot.ok() && tries < 1000; ++tries) {
      m.Quiesce();
      slot = m.AllocateForPut();
    }
    KVTIER_RETURN_IF_ERROR(slot.status());
    std::byte* data = m.t1().SlotData(*slot);
    Fill(i, data);
    const BlockKey parent = Key(i - 1);
    PutCommit put{Key(i), kNamespace, Bytes(i), PayloadChecksum(data, Bytes(i)),
                  i == 0 ? nullptr : &parent};
    return m.CommitPut(put, *slot).status();
  }

  // Gets block i, checks every byte, releases it; retries while T1 has no room.
  static absl::Status GetAndCheck(TierManager& m, uint64_t i) {
    for (int tries = 0;; ++tries) {
      std::promise<absl::StatusOr<LeasedBlock>> p;
      m.Get(Key(i), [&p](absl::StatusOr<LeasedBlock> r) { p.set_value(std::move(r)); });
      absl::StatusOr<LeasedBlock> got = p.get_future().get();
      if (!got.ok() && got.status().code() == absl::StatusCode::kResourceExhausted &&
          tries < 1000) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      KVTIER_RETURN_IF_ERROR(got.status());
      const bool whole = got->payload_bytes == Bytes(i) &&
                         MatchesPattern(Key(i), m.t1().SlotData(got->slot), Bytes(i));
      KVTIER_RETURN_IF_ERROR(m.Release(Key(i)));
      if (!whole) return absl::DataLossError("block " + std::to_string(i) + " differs");
      return absl::OkStatus();
    }
  }

  RedisTempDir dir_;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RemoteTierTest, T1VictimsGoToTheStoreAndComeBackWholeUnderConcurrentGets) {
  auto m = Manager(8);
  ASSERT_NE(m, nullptr);
  constexpr uint64_t kBlocks = 32;
  for (uint64_t i = 0; i < kBlocks; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  m->Quiesce();
  size_t remote = 0;
  for (uint64_t i = 0; i < kBlocks; ++i) {
    std::optional<BlockInfo> info = m->index().Find(Key(i));
    remote += info && info->InTier(Tier::kT3) ? 1 : 0;
  }
  EXPECT_GE(remote, kBlocks - 8);
  // Four readers over every block at once: promotions from T3 join, and evict each other.
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (uint64_t k = 0; k < kBlocks; ++k) {
        if (!GetAndCheck(*m, (k + static_cast<uint64_t>(t) * 5) % kBlocks).ok()) ++bad;
      }
    });
  }
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  const TierManagerStats s = m->Stats();
  EXPECT_GE(s.tier(Tier::kT1).moved_down, kBlocks - 8);
  EXPECT_GT(s.tier(Tier::kT3).promoted_out, 0u);
}

TEST_F(RemoteTierTest, ASecondManagerFindsTheBlocksThroughALookupsProbe) {
  auto first = Manager(8);
  ASSERT_NE(first, nullptr);
  for (uint64_t i = 0; i < 24; ++i) ASSERT_TRUE(Put(*first, i).ok()) << i;
  first->Quiesce();
  auto second = Manager(8);
  ASSERT_NE(second, nullptr);
  std::vector<BlockKey> keys;
  for (uint64_t i = 0; i < 8; ++i) keys.push_back(Key(i));  // the oldest: in the store only
  std::vector<TierMask> tiers(keys.size());
  ASSERT_EQ(second->index().LookupPrefix(keys, absl::MakeSpan(tiers)), 0u);
  ASSERT_EQ(second->ExtendPrefix(keys, 0, kNamespace, absl::MakeSpan(tiers)), keys.size());
  for (TierMask t : tiers) EXPECT_EQ(t, TierBit(Tier::kT3));
  for (uint64_t i = 0; i < keys.size(); ++i) EXPECT_TRUE(GetAndCheck(*second, i).ok()) << i;
  // A key the store does not hold ends the prefix.
  std::vector<TierMask> one(1);
  const BlockKey absent = Key(1000);
  EXPECT_EQ(
      second->ExtendPrefix(absl::MakeConstSpan(&absent, 1), 0, kNamespace, absl::MakeSpan(one)),
      0u);
  // A value recorded under another namespace id fails its header check: a counted miss, never
  // its bytes.
  const BlockKey foreign = Key(8);
  ASSERT_EQ(second->ExtendPrefix(absl::MakeConstSpan(&foreign, 1), 0, /*namespace_id=*/99,
                                 absl::MakeSpan(one)),
            1u);
  EXPECT_EQ(GetAndCheck(*second, 8).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(second->t3()->Stats().checksum_failures, 1u);
}

}  // namespace
}  // namespace kvtier::testing
