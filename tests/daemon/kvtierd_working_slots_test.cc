// Working slots (protocol v3; docs/protocol.md "Working slots") end to end: real kvtierd processes
// and the real client library. A client takes unkeyed T1 slots within its quota
// (daemon.max_working_slots), fills them through its own mapping of T1, and publishes them under
// their keys with the payload's XXH3-64, or frees them. Pinned here, each against the daemon's
// answer and the bytes another client reads back: the quota; a published block served whole to
// another client, leased to its writer until released; verify_puts refusing a wrong checksum and
// leaving the slot to its writer; a key already cached; repeated and foreign slots; working slots
// given back when their client goes away (process exit, SIGKILL, Client destroyed).
// kvtierd_working_slots_tier_test.cc has tier 0 without T0 and the way down to T2.
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
using testing::ItNamespace;
using testing::KvtierdWorkingSlotsTest;
using testing::LeasesHeld;
using testing::Payload;
using testing::SeqKeys;
using testing::UsedT1;

// Quota 4 per client, T0 and T1 together: the fifth take is OverQuota (in the same request as
// granted ones too), another client has its own 4, and a free or a publish makes room.
TEST_F(KvtierdWorkingSlotsTest, TakesStopAtTheQuotaAndAFreeOrAPublishMakesRoom) {
  StartDaemon({"--daemon.max_working_slots", "4"});
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const uint64_t used_before = UsedT1(*c);
  std::vector<uint32_t> slots = TakeT1(*c, 3);
  auto more = c->TakeWorkingSlots(Tier::kT1, 2);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(Codes(*more), (std::vector<BlockCode>{BlockCode::kOk, BlockCode::kOverQuota}));
  EXPECT_EQ((*more)[1].slot, 0u) << "no slot with OverQuota";
  slots.push_back((*more)[0].slot);
  EXPECT_EQ(UsedT1(*c), used_before + 4) << "an OverQuota take holds no slot";
  auto full = c->TakeWorkingSlots(Tier::kT1, 1);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(Codes(*full), std::vector<BlockCode>{BlockCode::kOverQuota});

  // The quota is per client: another one takes its own.
  auto other = Connect("other");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(TakeT1(*other, 4).size(), 4u);

  // A free makes room for one.
  auto freed = c->FreeWorking(Tier::kT1, std::vector<uint32_t>{slots[0]});
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*freed, std::vector<BlockCode>{BlockCode::kOk});
  std::vector<uint32_t> again = TakeT1(*c, 1);
  ASSERT_EQ(again.size(), 1u);
  slots[0] = again[0];
  EXPECT_EQ(Codes(*c->TakeWorkingSlots(Tier::kT1, 1)),
            std::vector<BlockCode>{BlockCode::kOverQuota});

  // A published slot is a cached block, no longer a working slot: it counts against nothing.
  const std::vector<BlockKey> keys = SeqKeys(*c, 1, 1);
  const WorkPublishItem item = Fill(*c, slots[1], keys[0]);
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item}),
            std::vector<BlockCode>{BlockCode::kOk});
  EXPECT_EQ(TakeT1(*c, 1).size(), 1u);
  EXPECT_EQ(Codes(*c->TakeWorkingSlots(Tier::kT1, 1)),
            std::vector<BlockCode>{BlockCode::kOverQuota});
  EXPECT_EQ(c->Stats()->requests_invalid, 0u);
}

// A slot filled through the writer's mapping of T1 and published is a block like any other: the
// chain is found by another client's lookup in T1 and its get returns the same bytes; the writer
// holds it leased (drop refused) until it releases, and then it can be dropped.
TEST_F(KvtierdWorkingSlotsTest, APublishedSlotIsServedToAnotherClientByteForByte) {
  StartDaemon();
  auto writer = Connect("writer");
  auto reader = Connect("reader");
  ASSERT_TRUE(writer != nullptr && reader != nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*writer, 2, 3);
  const std::vector<uint32_t> slots = TakeT1(*writer, keys.size());
  ASSERT_EQ(slots.size(), keys.size());
  std::vector<WorkPublishItem> items;
  for (size_t i = 0; i < keys.size(); ++i) {
    items.push_back(Fill(*writer, slots[i], keys[i],
                         i == 0 ? std::nullopt : std::optional<BlockKey>(keys[i - 1])));
  }
  EXPECT_EQ(reader->Lookup(keys)->hit_blocks, 0u) << "a working slot is not a cached block";
  auto published = writer->PublishWorking(Tier::kT1, items);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(*published, std::vector<BlockCode>(keys.size(), BlockCode::kOk));
  EXPECT_EQ(LeasesHeld(*writer), keys.size()) << "published blocks are leased to their writer";

  auto hit = reader->Lookup(keys);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->hit_blocks, keys.size());
  for (size_t i = 0; i < hit->hit_blocks; ++i) EXPECT_EQ(hit->tiers[i], TierBit(Tier::kT1));
  // The reader's get: the same bytes, in the very slots the writer filled.
  auto got = reader->Get(keys);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ((*got)[i].code, uint32_t(BlockCode::kOk)) << i;
    EXPECT_EQ((*got)[i].slot, slots[i]) << "published where it lies";
    const std::vector<std::byte> want = Payload(keys[i]);
    ASSERT_EQ((*got)[i].payload_bytes, want.size());
    EXPECT_EQ(std::memcmp(reader->SlotData((*got)[i].slot), want.data(), want.size()), 0) << i;
  }
  ASSERT_TRUE(reader->Release(keys).ok());
  EXPECT_EQ(Codes(*reader->Drop(keys)), std::vector<BlockCode>(keys.size(), BlockCode::kLeased));
  auto released = writer->Release(keys);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(Codes(*released), std::vector<BlockCode>(keys.size(), BlockCode::kOk));
  EXPECT_EQ(LeasesHeld(*writer), 0u);
  EXPECT_EQ(Codes(*reader->Drop(keys)), std::vector<BlockCode>(keys.size(), BlockCode::kOk));
  EXPECT_EQ(reader->Lookup(keys)->hit_blocks, 0u);
}

// With daemon.verify_puts the daemon hashes a T1 slot at publish: a wrong checksum is
// BadChecksum, the block is not cached, and the slot is still the writer's working slot, which
// it publishes with the right checksum (or could free).
TEST_F(KvtierdWorkingSlotsTest, WithVerifyPutsAWrongChecksumLeavesTheSlotToItsWriter) {
  StartDaemon({"--daemon.verify_puts", "true"});
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*c, 3, 1);
  const std::vector<uint32_t> slots = TakeT1(*c, 1);
  ASSERT_EQ(slots.size(), 1u);
  WorkPublishItem item = Fill(*c, slots[0], keys[0]);
  WorkPublishItem wrong = item;
  wrong.checksum ^= 1;
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{wrong}),
            std::vector<BlockCode>{BlockCode::kBadChecksum});
  EXPECT_EQ(c->Lookup(keys)->hit_blocks, 0u);
  EXPECT_EQ(LeasesHeld(*c), 0u);
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item}),
            std::vector<BlockCode>{BlockCode::kOk});
  ASSERT_TRUE(c->Release(keys).ok());
  auto reader = Connect("reader");
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(CheckAll(*reader, keys).ok());
}

// A key already cached in T1 (put by another client): publishing it is AlreadyPresent, the cached
// block keeps its bytes, and the slot is still the writer's, to free (or reuse).
TEST_F(KvtierdWorkingSlotsTest, PublishingAKeyAlreadyCachedIsAlreadyPresentAndTheSlotIsFreed) {
  StartDaemon();
  auto putter = Connect("putter");
  auto c = Connect("worker");
  ASSERT_TRUE(putter != nullptr && c != nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*c, 4, 1);
  ASSERT_EQ(*testing::PutKeys(*putter, keys), std::vector<BlockCode>{BlockCode::kOk});
  const uint64_t used = UsedT1(*c);
  const std::vector<uint32_t> slots = TakeT1(*c, 1);
  ASSERT_EQ(slots.size(), 1u);
  WorkPublishItem item = Fill(*c, slots[0], keys[0]);
  std::memset(c->MutableSlotData(slots[0]), 0x5A, item.payload_bytes);  // other bytes
  item.checksum = PayloadChecksum(c->MutableSlotData(slots[0]), item.payload_bytes);
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item}),
            std::vector<BlockCode>{BlockCode::kAlreadyPresent});
  EXPECT_EQ(LeasesHeld(*c), 0u);
  EXPECT_TRUE(CheckAll(*c, keys).ok()) << "the block cached first is served";
  EXPECT_EQ(UsedT1(*c), used + 1) << "the slot is still held";
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, slots), std::vector<BlockCode>{BlockCode::kOk});
  EXPECT_EQ(UsedT1(*c), used);
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, slots), std::vector<BlockCode>{BlockCode::kMissing});
}

// A slot named twice in one publish or free: the first decides, the repeat is Missing. A slot of
// another client is Missing to this one and stays that client's.
TEST_F(KvtierdWorkingSlotsTest, RepeatedAndForeignSlotsAreMissing) {
  StartDaemon();
  auto c = Connect("one");
  auto other = Connect("two");
  ASSERT_TRUE(c != nullptr && other != nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*c, 5, 2);
  const std::vector<uint32_t> mine = TakeT1(*c, 2);
  const std::vector<uint32_t> theirs = TakeT1(*other, 1);
  ASSERT_TRUE(mine.size() == 2 && theirs.size() == 1);
  const uint64_t used = UsedT1(*c);

  const WorkPublishItem item = Fill(*c, mine[0], keys[0]);
  WorkPublishItem repeat = item;
  repeat.key = keys[1];  // the same slot under another key
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item, repeat}),
            (std::vector<BlockCode>{BlockCode::kOk, BlockCode::kMissing}));
  EXPECT_EQ(c->Lookup(std::vector<BlockKey>{keys[1]})->hit_blocks, 0u);
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, std::vector<uint32_t>{mine[1], mine[1]}),
            (std::vector<BlockCode>{BlockCode::kOk, BlockCode::kMissing}));
  EXPECT_EQ(UsedT1(*c), used - 1) << "freed once";
  // The published slot is a cached block now, not a working slot.
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, std::vector<uint32_t>{mine[0]}),
            std::vector<BlockCode>{BlockCode::kMissing});

  // Another client's slot: Missing to publish and to free, and still the other's.
  WorkPublishItem foreign = Fill(*c, theirs[0], keys[1]);
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{foreign}),
            std::vector<BlockCode>{BlockCode::kMissing});
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, theirs), std::vector<BlockCode>{BlockCode::kMissing});
  EXPECT_EQ(c->Lookup(std::vector<BlockKey>{keys[1]})->hit_blocks, 0u);
  EXPECT_EQ(*other->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{foreign}),
            std::vector<BlockCode>{BlockCode::kOk});
  ASSERT_TRUE(c->Release(std::vector<BlockKey>{keys[0]}).ok());
  ASSERT_TRUE(other->Release(std::vector<BlockKey>{keys[1]}).ok());
  EXPECT_TRUE(CheckAll(*c, keys).ok());
  EXPECT_EQ(c->Stats()->requests_invalid, 0u);
}

// A client that goes away — its process exiting with the client open, SIGKILLed, or the Client
// destroyed — gives back its working slots (T1 occupancy returns to where it was) and the leases
// on what it published (those blocks stay cached, unleased: droppable).
TEST_F(KvtierdWorkingSlotsTest, AClientThatGoesAwayGivesBackItsWorkingSlots) {
  StartDaemon();
  auto observer = Connect("observer");
  ASSERT_NE(observer, nullptr);
  enum class End { kExit, kSigkill, kDestroyed };
  for (End end : {End::kExit, End::kSigkill, End::kDestroyed}) {
    const std::string what = end == End::kExit      ? "process exit"
                             : end == End::kSigkill ? "SIGKILL"
                                                    : "Client destroyed";
    const uint64_t used = UsedT1(*observer);
    const std::vector<BlockKey> keys = SeqKeys(*observer, 60 + static_cast<int>(end), 1);
    // Holds 5 working slots and one published block (leased), then goes away as `end` says.
    auto hold = [&](client::Client& c) {
      auto taken = c.TakeWorkingSlots(Tier::kT1, 6);
      if (!taken.ok() || Codes(*taken) != std::vector<BlockCode>(6, BlockCode::kOk)) return false;
      const WorkPublishItem item = Fill(c, (*taken)[5].slot, keys[0]);
      auto published = c.PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item});
      return published.ok() && *published == std::vector<BlockCode>{BlockCode::kOk};
    };
    if (end == End::kDestroyed) {
      auto c = Connect("leaver");
      ASSERT_NE(c, nullptr);
      ASSERT_TRUE(hold(*c)) << what;
      EXPECT_EQ(UsedT1(*observer), used + 6) << what;
      EXPECT_EQ(LeasesHeld(*observer), 1u) << what;
      c.reset();
    } else {
      testing::Pipe held, go;
      const pid_t child = testing::RunChild([&] {
        auto c = testing::ConnectTo(*daemon_, ItNamespace(), "leaver");
        if (!c.ok() || !hold(**c)) return 1;
        held.Signal();
        if (!go.Await()) return 2;
        if (end == End::kSigkill) ::raise(SIGKILL);
        ::_exit(0);  // the client is never closed: the kernel closes its socket
      });
      ASSERT_TRUE(held.Await()) << what << ": the child failed\n" << daemon_->Log();
      EXPECT_EQ(UsedT1(*observer), used + 6) << what;
      EXPECT_EQ(LeasesHeld(*observer), 1u) << what;
      go.Signal();
      const int status = testing::WaitChild(child);
      EXPECT_TRUE(end == End::kSigkill ? WIFSIGNALED(status) : testing::ExitedZero(status))
          << what << ": " << testing::DescribeWaitStatus(status);
    }
    EXPECT_TRUE(testing::Eventually([&] {
      return UsedT1(*observer) == used + 1 && LeasesHeld(*observer) == 0;
    })) << what
        << ": " << UsedT1(*observer) << " T1 slots used, " << used + 1 << " expected\n"
        << daemon_->Log();
    EXPECT_TRUE(CheckAll(*observer, keys).ok()) << what << ": the published block stays cached";
    EXPECT_EQ(Codes(*observer->Drop(keys)), std::vector<BlockCode>{BlockCode::kOk}) << what;
    EXPECT_EQ(UsedT1(*observer), used) << what;
  }
}

}  // namespace
}  // namespace kvtier
