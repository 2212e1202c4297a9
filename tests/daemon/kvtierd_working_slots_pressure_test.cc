// Working slots under T1 pressure, end to end (kvtierd_working_slots_test.cc has the basics): a
// working slot is leased, so blocks cycling through a small T1 to T2 never take it or touch its
// bytes; and a T1 taken whole by working slots makes puts and T2 reads answer RetryLater (nothing
// hangs, nothing crashes) until a free gives the room back.
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

}  // namespace
}  // namespace kvtier
