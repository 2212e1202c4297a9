// The C++ client's protocol-v3 calls (working slots, put_begin's tier) against FakeKvtierd, which
// decodes every request with the daemon's own decoder: bad arguments are refused before anything
// is sent and the connection stays usable; good ones reach the daemon with their tier and
// arguments; answers naming slots the tier does not have are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/kvtier_client.h"
#include "tests/client/fake_kvtierd.h"
#include "tests/daemon/config_test_util.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;
using protocol::Op;
using protocol::WorkPublishItem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint32_t kSlotBytes = 4096;

uint32_t Code(BlockCode c) { return static_cast<uint32_t>(c); }

// What the fake daemon saw, and what it answers: work_take gives slots 3, 4, ... of the tier
// (or `take_slot` for every slot when set); work_publish and work_free answer kOk per item except
// `publish_code` for publish's item 1; put_begin kOk with slot i; put_commit kOk.
struct Script {
  absl::Mutex mu;
  std::vector<protocol::Request> seen ABSL_GUARDED_BY(mu);
  std::vector<WorkPublishItem> published ABSL_GUARDED_BY(mu);
  std::vector<uint32_t> freed ABSL_GUARDED_BY(mu);
  uint32_t take_slot ABSL_GUARDED_BY(mu) = UINT32_MAX;
  BlockCode publish_code = BlockCode::kAlreadyPresent;

  void SetTakeSlot(uint32_t slot) {
    absl::MutexLock lock(&mu);
    take_slot = slot;
  }

  std::vector<BlockResult> Answer(const protocol::Request& r, protocol::ArenaView arena) {
    absl::MutexLock lock(&mu);
    seen.push_back(r);
    std::vector<BlockResult> out(r.count);
    for (uint32_t i = 0; i < r.count; ++i) {
      switch (r.op) {
        case Op::kWorkTake:
          out[i] = {0, take_slot != UINT32_MAX ? take_slot : 3 + i, kSlotBytes, 0};
          break;
        case Op::kWorkPublish:
          if (!protocol::ReadWorkPublish(arena, r, kSlotBytes, &published).ok()) return {};
          out[i] = i == 1 ? BlockResult{Code(publish_code), 0, 0, 0}
                          : BlockResult{0, published[i].slot, published[i].payload_bytes, 0};
          break;
        case Op::kWorkFree:
          if (!protocol::ReadWorkSlots(arena, r, &freed).ok()) return {};
          out[i] = {i == 0 ? 0 : Code(BlockCode::kMissing), 0, 0, 0};
          break;
        case Op::kPutBegin:
          out[i] = {0, i, 100, 0};
          break;
        default:
          out[i] = {};
      }
    }
    return out;
  }
  std::vector<protocol::Request> Seen() {
    absl::MutexLock lock(&mu);
    return seen;
  }
};

class WorkingSlotsTest : public ::testing::Test {
 protected:
  // Starts a fake daemon (T0 of t0_slots slots, none for 0) and connects to it.
  void Connect(uint32_t t0_slots) {
    const std::string path = tmp_.path() + "/fake.sock";
    FakeKvtierdOptions o;
    o.t1_slots = 16;
    o.slot_bytes = kSlotBytes;
    o.t0_slots = t0_slots;
    auto fake = testing::FakeKvtierd::Start(
        path, o,
        [this](const protocol::Request& r, protocol::ArenaView a) { return script_.Answer(r, a); });
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = std::move(*fake);
    client::ClientOptions options;
    options.socket_path = path;
    options.ns.model_id = "working-slots-model";
    options.timeout_ms = 20000;
    auto c = client::Client::Connect(options);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  using FakeKvtierdOptions = testing::FakeKvtierd::Options;

  static std::vector<WorkPublishItem> Items(size_t n, uint32_t payload_bytes) {
    std::vector<WorkPublishItem> items(n);
    for (size_t i = 0; i < n; ++i) {
      items[i] = {
          {i + 1, 2 * i}, std::nullopt, 0xABC + i, static_cast<uint32_t>(3 + i), payload_bytes};
    }
    return items;
  }

  testing::TempDir tmp_;
  Script script_;
  std::unique_ptr<testing::FakeKvtierd> fake_;  // destroyed after client_
  std::unique_ptr<client::Client> client_;
};

// Each bad argument: InvalidArgument naming it, nothing sent; afterwards the connection works.
TEST_F(WorkingSlotsTest, BadArgumentsAreRefusedBeforeAnythingIsSent) {
  Connect(/*t0_slots=*/0);
  client::Client& c = *client_;
  const auto refused = [](const absl::Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(what));
  };
  refused(c.TakeWorkingSlots(Tier::kT0, 1).status(),
          "TakeWorkingSlots: tier T0, but kvtierd has no T0");
  refused(c.TakeWorkingSlots(Tier::kT2, 1).status(), "tier 2 (T2); slots are of T0 or T1");
  refused(c.TakeWorkingSlots(Tier::kT1, 0).status(),
          "TakeWorkingSlots: n is 0; one request takes 1 to 1024");
  refused(c.TakeWorkingSlots(Tier::kT1, 1025).status(), "n is 1025");
  std::vector<WorkPublishItem> items = Items(2, kSlotBytes);
  items[1].payload_bytes = 0;
  refused(c.PublishWorking(Tier::kT1, items).status(),
          "PublishWorking: items[1].payload_bytes is 0 bytes; a payload is 1 to 4096 bytes");
  items[1].payload_bytes = kSlotBytes + 1;
  refused(c.PublishWorking(Tier::kT1, items).status(), "items[1].payload_bytes is 4097 bytes");
  refused(c.PublishWorking(Tier::kT0, Items(1, 10)).status(), "PublishWorking: tier T0, but");
  refused(c.PublishWorking(Tier::kT2, Items(1, 10)).status(), "PublishWorking: tier 2 (T2)");
  refused(c.PublishWorking(Tier::kT1, Items(1025, 10)).status(), "items.size() is 1025");
  const std::vector<uint32_t> slots(1025, 1);
  refused(c.FreeWorking(Tier::kT0, {slots.data(), 1}).status(), "FreeWorking: tier T0, but");
  refused(c.FreeWorking(Tier::kT1, slots).status(), "FreeWorking: slots.size() is 1025");
  const protocol::PutBeginItem begin{{1, 1}, std::nullopt, 10};
  refused(c.PutBegin({&begin, 1}, Tier::kT0).status(), "PutBegin: tier T0, but kvtierd has no T0");
  refused(c.PutBegin({&begin, 1}, Tier::kT2).status(), "PutBegin: tier 2 (T2)");
  // Empty publishes and frees are no requests at all.
  EXPECT_TRUE(c.PublishWorking(Tier::kT1, {})->empty());
  EXPECT_TRUE(c.FreeWorking(Tier::kT1, {})->empty());
  EXPECT_EQ(fake_->requests(), 0u);
  ASSERT_TRUE(c.Nop().ok());
  EXPECT_EQ(fake_->requests(), 1u);
  EXPECT_EQ(fake_->malformed(), 0u);
}

TEST_F(WorkingSlotsTest, TakePublishAndFreeCarryTheirTierAndArguments) {
  Connect(/*t0_slots=*/8);
  for (Tier tier : {Tier::kT0, Tier::kT1}) {
    SCOPED_TRACE(TierName(tier));
    auto taken = client_->TakeWorkingSlots(tier, 3);
    ASSERT_TRUE(taken.ok()) << taken.status();
    ASSERT_EQ(taken->size(), 3u);
    EXPECT_EQ((*taken)[2].slot, 5u);
    EXPECT_EQ((*taken)[2].payload_bytes, kSlotBytes);
    EXPECT_EQ(fake_->last().op, Op::kWorkTake);
    EXPECT_EQ(fake_->last().count, 3u);
    EXPECT_EQ(fake_->last().tier, static_cast<uint8_t>(tier));

    std::vector<WorkPublishItem> items = Items(3, 1000);
    items[2].parent = items[1].key;
    auto published = client_->PublishWorking(tier, items);
    ASSERT_TRUE(published.ok()) << published.status();
    EXPECT_THAT(*published,
                ElementsAre(BlockCode::kOk, BlockCode::kAlreadyPresent, BlockCode::kOk));
    EXPECT_EQ(fake_->last().tier, static_cast<uint8_t>(tier));
    {
      absl::MutexLock lock(&script_.mu);
      EXPECT_EQ(script_.published, items);  // what the daemon decoded is what was meant
    }
    const std::vector<uint32_t> slots{4, 4};  // a repeat: the daemon's answer, kMissing, comes back
    auto freed = client_->FreeWorking(tier, slots);
    ASSERT_TRUE(freed.ok()) << freed.status();
    EXPECT_THAT(*freed, ElementsAre(BlockCode::kOk, BlockCode::kMissing));
    EXPECT_EQ(fake_->last().op, Op::kWorkFree);
    EXPECT_EQ(fake_->last().tier, static_cast<uint8_t>(tier));
    absl::MutexLock lock(&script_.mu);
    EXPECT_EQ(script_.freed, slots);
  }
  EXPECT_EQ(fake_->malformed(), 0u);
}

TEST_F(WorkingSlotsTest, PutBeginNamesTheTierOfItsSlots) {
  Connect(/*t0_slots=*/8);
  const std::vector<BlockKey> keys{{1, 2}, {3, 4}};
  const std::vector<std::byte> payload(100, std::byte{7});
  const std::vector<absl::Span<const std::byte>> payloads{payload, payload};
  ASSERT_TRUE(client_->Put(keys, payloads).ok());  // put_begin (T1), then put_commit
  const protocol::PutBeginItem begin{{5, 6}, std::nullopt, 100};
  auto t0 = client_->PutBegin({&begin, 1}, Tier::kT0);
  ASSERT_TRUE(t0.ok()) << t0.status();
  auto t1 = client_->PutBegin({&begin, 1});
  ASSERT_TRUE(t1.ok()) << t1.status();
  std::vector<std::pair<Op, uint8_t>> sent;
  for (const protocol::Request& r : script_.Seen()) sent.emplace_back(r.op, r.tier);
  EXPECT_THAT(
      sent,
      ElementsAre(std::pair(Op::kPutBegin, uint8_t{1}), std::pair(Op::kPutCommit, uint8_t{0}),
                  std::pair(Op::kPutBegin, uint8_t{0}), std::pair(Op::kPutBegin, uint8_t{1})));
}

// T0 has 8 slots and T1 16 here: a slot is checked against the tier the request named.
TEST_F(WorkingSlotsTest, AnswersNamingSlotsTheTierDoesNotHaveAreRefused) {
  Connect(/*t0_slots=*/8);
  script_.SetTakeSlot(12);
  EXPECT_TRUE(client_->TakeWorkingSlots(Tier::kT1, 1).ok());
  auto t0 = client_->TakeWorkingSlots(Tier::kT0, 1);
  EXPECT_FALSE(t0.ok());
  EXPECT_THAT(std::string(t0.status().message()), HasSubstr("slot 12 outside [0, 8) of T0"));
  script_.SetTakeSlot(16);
  auto t1 = client_->TakeWorkingSlots(Tier::kT1, 1);
  EXPECT_FALSE(t1.ok());
  EXPECT_THAT(std::string(t1.status().message()), HasSubstr("slot 16 outside [0, 16) of T1"));
}

}  // namespace
}  // namespace kvtier
