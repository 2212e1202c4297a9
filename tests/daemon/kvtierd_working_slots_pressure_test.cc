// Working slots under load, end to end (kvtierd_working_slots_test.cc has the basics): a working
// slot is leased, so blocks cycling through a small T1 to T2 never take it or touch its bytes; a
// T1 taken whole by working slots makes puts and T2 reads answer RetryLater (nothing hangs,
// nothing crashes) until a free gives the room back; and client processes publishing the same
// keys at once store each once, whole, and leave no slot or lease behind.
#include <gtest/gtest.h>

#include "tests/daemon/working_slots_test_util.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;
using protocol::WorkPublishItem;
using testing::CheckAll;
using testing::Codes;
using testing::Fill;
using testing::Payload;
using testing::SeqKeys;
using testing::UsedT1;

// T1 of 64 slots, T2 of 256.
const std::vector<std::string> kSmallT1 = {"--t1.capacity_bytes", "1MiB"};

class KvtierdWorkingSlotsPressureTest : public testing::KvtierdWorkingSlotsTest {};

// 16 working slots filled, then 160 blocks put through T1 by another client (most of them demoted
// to T2 on the way): the slots hold the same bytes, publish, and serve; every put block is served.
TEST_F(KvtierdWorkingSlotsPressureTest, WorkingSlotsKeepTheirBytesWhileT1Evicts) {
  StartDaemon(kSmallT1);
  auto c = Connect("worker");
  auto loader = Connect("loader");
  ASSERT_TRUE(c != nullptr && loader != nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*c, 90, 16);
  const std::vector<uint32_t> slots = TakeT1(*c, keys.size());
  ASSERT_EQ(slots.size(), keys.size());
  std::vector<WorkPublishItem> items;
  for (size_t i = 0; i < keys.size(); ++i) items.push_back(Fill(*c, slots[i], keys[i]));
  for (uint32_t s = 0; s < 40; ++s) {
    const absl::Status put = testing::PutRetrying(*loader, SeqKeys(*loader, 100 + s, 4));
    ASSERT_TRUE(put.ok()) << "sequence " << s << ": " << put << "\n" << daemon_->Log();
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::vector<std::byte> want = Payload(keys[i]);
    EXPECT_EQ(std::memcmp(c->SlotData(slots[i]), want.data(), want.size()), 0)
        << "working slot " << slots[i] << " was overwritten";
  }
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, items),
            std::vector<BlockCode>(keys.size(), BlockCode::kOk));
  ASSERT_TRUE(c->Release(keys).ok());
  EXPECT_TRUE(CheckAll(*loader, keys).ok());
  for (uint32_t s = 0; s < 40; ++s) {
    const absl::Status check = CheckAll(*loader, SeqKeys(*loader, 100 + s, 4));
    EXPECT_TRUE(check.ok()) << "sequence " << s << ": " << check;
  }
}

// One client takes every T1 slot as a working slot (the quota, 1024, is above T1's 64; clean
// blocks are shed to make room): another client's put is RetryLater, and so is its get of a block
// only in T2 (no T1 slot to read it into); nothing waits for the hog. Once it frees its slots the
// get and the put succeed, byte for byte.
TEST_F(KvtierdWorkingSlotsPressureTest, AT1FullOfWorkingSlotsAnswersRetryLaterUntilAFree) {
  StartDaemon(kSmallT1);
  auto loader = Connect("loader");
  auto hog = Connect("hog");
  ASSERT_TRUE(loader != nullptr && hog != nullptr);
  // A block pushed down to T2 by 160 more.
  const std::vector<BlockKey> old = SeqKeys(*loader, 80, 1);
  ASSERT_TRUE(testing::PutRetrying(*loader, old).ok());
  for (uint32_t s = 0; s < 40; ++s) {
    ASSERT_TRUE(testing::PutRetrying(*loader, SeqKeys(*loader, 200 + s, 4)).ok());
  }
  auto where = loader->Lookup(old);
  ASSERT_TRUE(where.ok() && where->hit_blocks == 1);
  ASSERT_EQ(where->tiers[0], TierBit(Tier::kT2)) << "the block was not demoted";

  const uint64_t total = hog->Stats()->t1_slots_total;
  std::vector<uint32_t> slots;
  ASSERT_TRUE(testing::Eventually([&] {
    auto t = hog->TakeWorkingSlots(Tier::kT1, 1);
    if (t.ok() && (*t)[0].code == uint32_t(BlockCode::kOk)) slots.push_back((*t)[0].slot);
    return !t.ok() || slots.size() == total;  // RetryLater while dirty blocks go down to T2
  })) << slots.size()
      << " of " << total << " slots taken";
  ASSERT_EQ(slots.size(), total);
  EXPECT_EQ(UsedT1(*loader), total);
  EXPECT_EQ(Codes(*hog->TakeWorkingSlots(Tier::kT1, 1)),
            std::vector<BlockCode>{BlockCode::kRetryLater});

  const std::vector<BlockKey> fresh = SeqKeys(*loader, 300, 1);
  EXPECT_EQ(*testing::PutKeys(*loader, fresh), std::vector<BlockCode>{BlockCode::kRetryLater});
  auto got = loader->Get(old);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Codes(*got), std::vector<BlockCode>{BlockCode::kRetryLater});
  EXPECT_EQ(loader->Stats()->leases_held, 0u) << "a RetryLater get holds no lease";

  EXPECT_EQ(*hog->FreeWorking(Tier::kT1, slots),
            std::vector<BlockCode>(slots.size(), BlockCode::kOk));
  EXPECT_TRUE(CheckAll(*loader, old).ok());
  EXPECT_EQ(*testing::PutKeys(*loader, fresh), std::vector<BlockCode>{BlockCode::kOk});
  EXPECT_TRUE(CheckAll(*loader, fresh).ok());
}

// Four client processes, 100 rounds each: take 3 slots, publish two of them under keys every
// process uses in that round (one of them also as the other's parent), free the third, release.
// Each key is stored once (one OK per key over all processes, AlreadyPresent for the rest, whose
// slots they then free), every block is served whole, and once the processes are gone T1 holds
// exactly the blocks and no lease is left.
TEST_F(KvtierdWorkingSlotsPressureTest, ProcessesPublishingTheSameKeysStoreEachOnce) {
  StartDaemon();
  auto observer = Connect("observer");
  ASSERT_NE(observer, nullptr);
  const uint64_t used = UsedT1(*observer);
  constexpr int kProcesses = 4;
  constexpr uint32_t kRounds = 100;
  testing::Pipe stored;  // one byte per key a process stored (publish OK)
  std::vector<pid_t> children;
  for (int who = 0; who < kProcesses; ++who) {
    children.push_back(testing::RunChild([&] {
      auto c = testing::ConnectTo(*daemon_, testing::ItNamespace(), "publisher");
      if (!c.ok()) return testing::ChildCheck(c.status(), "connect", 10);
      for (uint32_t round = 0; round < kRounds; ++round) {
        const std::vector<BlockKey> keys = SeqKeys(**c, 1000 + round, 2);
        auto taken = (*c)->TakeWorkingSlots(Tier::kT1, 3);
        if (!taken.ok() || Codes(*taken) != std::vector<BlockCode>(3, BlockCode::kOk)) return 11;
        const std::vector<WorkPublishItem> items = {Fill(**c, (*taken)[0].slot, keys[0]),
                                                    Fill(**c, (*taken)[1].slot, keys[1], keys[0])};
        auto codes = (*c)->PublishWorking(Tier::kT1, items);
        if (!codes.ok()) return 12;
        std::vector<uint32_t> unpublished = {(*taken)[2].slot};
        std::vector<BlockKey> leased;
        for (size_t i = 0; i < 2; ++i) {
          if ((*codes)[i] == BlockCode::kOk) {
            leased.push_back(keys[i]);
            stored.Signal();
          } else if ((*codes)[i] == BlockCode::kAlreadyPresent) {
            unpublished.push_back(items[i].slot);
          } else {
            return 13;
          }
        }
        auto freed = (*c)->FreeWorking(Tier::kT1, unpublished);
        if (!freed.ok() || *freed != std::vector<BlockCode>(unpublished.size(), BlockCode::kOk)) {
          return 14;
        }
        if (!(*c)->Release(leased).ok()) return 15;
      }
      return 0;
    }));
  }
  stored.CloseWrite();
  for (pid_t child : children) {
    const int status = testing::WaitChild(child);
    EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
  }
  EXPECT_EQ(stored.Drain(), 2 * kRounds) << "each key stored exactly once";
  for (uint32_t round = 0; round < kRounds; ++round) {
    const absl::Status check = CheckAll(*observer, SeqKeys(*observer, 1000 + round, 2));
    EXPECT_TRUE(check.ok()) << "round " << round << ": " << check;
  }
  EXPECT_TRUE(testing::Eventually([&] {
    return UsedT1(*observer) == used + 2 * kRounds && observer->Stats()->leases_held == 0;
  })) << UsedT1(*observer)
      << " T1 slots used, " << used + 2 * kRounds << " expected";
}

}  // namespace
}  // namespace kvtier
