// Working slots (protocol v3) through the Service over a real tier manager: the per-session
// quota, publish (a cached block leased to its writer), a key already present, verify_puts,
// repeated and foreign slots, and a session that closes holding slots.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <future>

#include "daemon/metrics.h"
#include "daemon/service.h"
#include "tests/tiers/tier_manager_test_util.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using testing::ManagerOptions;

BlockKey K(uint64_t i) { return testing::KeyOf(i); }

class ServiceWorkTest : public ::testing::Test {
 protected:
  void Start(ServiceOptions options) {
    auto m = TierManager::Create(ManagerOptions(16, "", 0));
    ASSERT_TRUE(m.ok()) << m.status();
    tiers_ = std::move(*m);
    scope_ = std::make_unique<KeyScope>(*KeyScope::Load(""));
    service_ = std::make_unique<Service>(*tiers_, *scope_, nullptr, nullptr, options);
  }
  void SetUp() override {
    ServiceOptions options;
    options.max_working_slots = 4;
    Start(options);
  }

  std::shared_ptr<Session> Open() {
    Namespace ns;
    ns.model_id = "m";
    auto s = service_->Open(ns);
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }
  // Fills T1 slot `slot` with block i's payload; its checksum.
  uint64_t Fill(SlotId slot, uint64_t i, uint32_t bytes = 4096) {
    auto* data = reinterpret_cast<uint8_t*>(tiers_->t1().SlotData(slot));
    testing::FillPayload(i, data, bytes);
    return XXH3_64bits(data, bytes);
  }
  protocol::WorkPublishItem Item(SlotId slot, uint64_t i, uint64_t sum, uint32_t bytes = 4096) {
    return protocol::WorkPublishItem{K(i), std::nullopt, sum, slot, bytes};
  }
  uint64_t T1Used() const { return tiers_->t1().Stats().used_slots; }

  std::unique_ptr<TierManager> tiers_;
  std::unique_ptr<KeyScope> scope_;
  std::unique_ptr<Service> service_;
};

TEST_F(ServiceWorkTest, ASessionTakesUpToItsQuotaAndAFreeMakesRoom) {
  auto s = Open();
  std::vector<SlotResult> taken = service_->WorkTake(*s, Tier::kT1, 6);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(taken[i].code, BlockCode::kOk) << i;
    EXPECT_EQ(taken[i].payload_bytes, tiers_->t1().slot_bytes());
  }
  EXPECT_EQ(taken[4].code, BlockCode::kOverQuota);
  EXPECT_EQ(taken[5].code, BlockCode::kOverQuota);
  EXPECT_EQ(s->working_slots(), 4u);
  EXPECT_EQ(T1Used(), 4u);
  // Another session has its own quota.
  auto other = Open();
  EXPECT_EQ(service_->WorkTake(*other, Tier::kT1, 1)[0].code, BlockCode::kOk);
  EXPECT_EQ(service_->WorkFree(*s, Tier::kT1, std::vector<uint32_t>{taken[0].slot})[0],
            BlockCode::kOk);
  EXPECT_EQ(T1Used(), 4u);
  EXPECT_EQ(service_->WorkTake(*s, Tier::kT1, 1)[0].code, BlockCode::kOk);
  const ServiceStats stats = service_->Stats();
  EXPECT_EQ(stats.work_taken, 6u);
  EXPECT_EQ(stats.work_over_quota, 2u);
  EXPECT_EQ(stats.work_freed, 1u);
  EXPECT_EQ(stats.working_slots, 5u);
}

TEST_F(ServiceWorkTest, APublishedSlotIsACachedBlockLeasedToItsWriter) {
  auto s = Open();
  const SlotResult taken = service_->WorkTake(*s, Tier::kT1, 1)[0];
  ASSERT_EQ(taken.code, BlockCode::kOk);
  const uint64_t sum = Fill(taken.slot, 7);
  const SlotResult published =
      service_->WorkPublish(*s, Tier::kT1, std::vector{Item(taken.slot, 7, sum)})[0];
  ASSERT_EQ(published.code, BlockCode::kOk);
  EXPECT_EQ(published.slot, taken.slot);  // published where it lies: no copy
  EXPECT_EQ(published.payload_bytes, 4096u);
  EXPECT_EQ(s->working_slots(), 0u);
  EXPECT_EQ(s->leases_held(), 1u);
  // Another session finds it and reads the same bytes from the same slot.
  auto reader = Open();
  std::vector<TierMask> masks(1);
  EXPECT_EQ(service_->Lookup(*reader, std::vector{K(7)}, absl::MakeSpan(masks)), 1u);
  EXPECT_EQ(masks[0], TierBit(Tier::kT1));
  std::promise<std::vector<SlotResult>> got;
  service_->Get(reader, std::vector{K(7)},
                [&got](std::vector<SlotResult> r) { got.set_value(std::move(r)); });
  const SlotResult read = got.get_future().get()[0];
  ASSERT_EQ(read.code, BlockCode::kOk);
  EXPECT_EQ(read.slot, taken.slot);
  EXPECT_EQ(XXH3_64bits(tiers_->t1().SlotData(read.slot), read.payload_bytes), sum);
  // Leased by both: not droppable until both release.
  EXPECT_EQ(service_->Drop(*reader, std::vector{K(7)})[0], BlockCode::kLeased);
  EXPECT_EQ(service_->Release(*s, std::vector{K(7)})[0], BlockCode::kOk);
  EXPECT_EQ(service_->Release(*reader, std::vector{K(7)})[0], BlockCode::kOk);
  EXPECT_EQ(service_->Drop(*reader, std::vector{K(7)})[0], BlockCode::kOk);
  EXPECT_EQ(T1Used(), 0u);
  EXPECT_EQ(service_->Stats().work_published, 1u);
}

TEST_F(ServiceWorkTest, PublishingAKeyAlreadyCachedLeavesTheSlotToItsWriter) {
  auto s = Open();
  std::vector<SlotResult> taken = service_->WorkTake(*s, Tier::kT1, 2);
  const uint64_t sum = Fill(taken[0].slot, 3);
  ASSERT_EQ(service_->WorkPublish(*s, Tier::kT1, std::vector{Item(taken[0].slot, 3, sum)})[0].code,
            BlockCode::kOk);
  // The same key from a second slot: cached already; the slot stays the session's to reuse.
  Fill(taken[1].slot, 3);
  EXPECT_EQ(service_->WorkPublish(*s, Tier::kT1, std::vector{Item(taken[1].slot, 3, sum)})[0].code,
            BlockCode::kAlreadyPresent);
  EXPECT_EQ(s->working_slots(), 1u);
  EXPECT_EQ(s->leases_held(), 1u);  // only the first publish leased
  const uint64_t other = Fill(taken[1].slot, 4);
  EXPECT_EQ(
      service_->WorkPublish(*s, Tier::kT1, std::vector{Item(taken[1].slot, 4, other)})[0].code,
      BlockCode::kOk);
  EXPECT_EQ(s->working_slots(), 0u);
}

TEST_F(ServiceWorkTest, RepeatedAndForeignSlotsAreMissing) {
  auto s = Open(), other = Open();
  std::vector<SlotResult> taken = service_->WorkTake(*s, Tier::kT1, 2);
  const uint64_t sum = Fill(taken[0].slot, 1);
  // Another session's slot, and a slot nobody took, are not this session's.
  EXPECT_EQ(
      service_->WorkPublish(*other, Tier::kT1, std::vector{Item(taken[0].slot, 1, sum)})[0].code,
      BlockCode::kMissing);
  EXPECT_EQ(service_->WorkFree(*other, Tier::kT1, std::vector<uint32_t>{taken[1].slot})[0],
            BlockCode::kMissing);
  uint32_t untaken = 0;
  while (untaken == taken[0].slot || untaken == taken[1].slot) ++untaken;
  EXPECT_EQ(service_->WorkFree(*s, Tier::kT1, std::vector<uint32_t>{untaken})[0],
            BlockCode::kMissing);
  // A slot named twice in one request: the first occurrence decides.
  std::vector<SlotResult> twice = service_->WorkPublish(
      *s, Tier::kT1, std::vector{Item(taken[0].slot, 1, sum), Item(taken[0].slot, 2, sum)});
  EXPECT_EQ(twice[0].code, BlockCode::kOk);
  EXPECT_EQ(twice[1].code, BlockCode::kMissing);
  EXPECT_EQ(service_->WorkFree(*s, Tier::kT1, std::vector<uint32_t>{taken[1].slot, taken[1].slot}),
            (std::vector<BlockCode>{BlockCode::kOk, BlockCode::kMissing}));
  // A bad payload size is refused for that item only; the slot stays the session's.
  std::vector<SlotResult> more = service_->WorkTake(*s, Tier::kT1, 1);
  EXPECT_EQ(service_->WorkPublish(*s, Tier::kT1, std::vector{Item(more[0].slot, 9, 0, 0)})[0].code,
            BlockCode::kFailed);
  EXPECT_EQ(s->working_slots(), 1u);
}

TEST_F(ServiceWorkTest, ClosingASessionFreesItsWorkingSlotsAndKeepsWhatItPublished) {
  auto s = Open();
  std::vector<SlotResult> taken = service_->WorkTake(*s, Tier::kT1, 3);
  const uint64_t sum = Fill(taken[0].slot, 5);
  ASSERT_EQ(service_->WorkPublish(*s, Tier::kT1, std::vector{Item(taken[0].slot, 5, sum)})[0].code,
            BlockCode::kOk);
  EXPECT_EQ(T1Used(), 3u);
  service_->Close(*s);
  EXPECT_EQ(T1Used(), 1u);  // the published block stays cached, its lease given back
  EXPECT_EQ(service_->Stats().working_slots, 0u);
  EXPECT_EQ(service_->leases_held(), 0u);
  EXPECT_EQ(service_->WorkTake(*s, Tier::kT1, 1)[0].code, BlockCode::kMissing);
  auto reader = Open();
  EXPECT_EQ(service_->Drop(*reader, std::vector{K(5)})[0], BlockCode::kOk);
}

TEST_F(ServiceWorkTest, WithoutAT0NoT0SlotIsTaken) {
  auto s = Open();
  EXPECT_EQ(service_->WorkTake(*s, Tier::kT0, 1)[0].code, BlockCode::kFailed);
  EXPECT_EQ(s->working_slots(), 0u);
}

TEST(ServiceWorkMetricsTest, WorkingSlotsAreCountedAndTheGaugeFollowsThem) {
  auto m = TierManager::Create(ManagerOptions(16, "", 0));
  ASSERT_TRUE(m.ok()) << m.status();
  KeyScope scope = *KeyScope::Load("");
  auto metrics = DaemonMetrics::Create("");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ServiceOptions options;
  options.max_working_slots = 3;
  Service service(**m, scope, nullptr, metrics->get(), options);
  Namespace ns;
  ns.model_id = "m";
  auto s = *service.Open(ns);
  std::vector<SlotResult> taken = service.WorkTake(*s, Tier::kT1, 4);  // 3 taken, 1 over quota
  auto* data = reinterpret_cast<uint8_t*>((*m)->t1().SlotData(taken[0].slot));
  testing::FillPayload(1, data, 4096);
  protocol::WorkPublishItem item{K(1), std::nullopt, XXH3_64bits(data, 4096), taken[0].slot, 4096};
  ASSERT_EQ(service.WorkPublish(*s, Tier::kT1, std::vector{item})[0].code, BlockCode::kOk);
  ASSERT_EQ(service.WorkFree(*s, Tier::kT1, std::vector<uint32_t>{taken[1].slot})[0],
            BlockCode::kOk);
  std::string page = (*metrics)->Render();
  EXPECT_NE(page.find("kvtier_working_slots 1\n"), std::string::npos) << page;
  EXPECT_NE(page.find("kvtier_working_slot_ops_total{op=\"take\"} 3\n"), std::string::npos);
  EXPECT_NE(page.find("kvtier_working_slot_ops_total{op=\"publish\"} 1\n"), std::string::npos);
  EXPECT_NE(page.find("kvtier_working_slot_ops_total{op=\"over_quota\"} 1\n"), std::string::npos);
  service.Close(*s);  // the last slot goes back with the session
  page = (*metrics)->Render();
  EXPECT_NE(page.find("kvtier_working_slots 0\n"), std::string::npos) << page;
  EXPECT_NE(page.find("kvtier_working_slot_ops_total{op=\"free\"} 2\n"), std::string::npos);
}

TEST(ServiceWorkVerifyTest, VerifyPutsRefusesAPayloadThatIsNotItsChecksumAndKeepsTheSlot) {
  auto m = TierManager::Create(ManagerOptions(16, "", 0));
  ASSERT_TRUE(m.ok()) << m.status();
  KeyScope scope = *KeyScope::Load("");
  ServiceOptions options;
  options.verify_puts = true;
  Service service(**m, scope, nullptr, nullptr, options);
  Namespace ns;
  ns.model_id = "m";
  auto s = *service.Open(ns);
  const SlotResult taken = service.WorkTake(*s, Tier::kT1, 1)[0];
  auto* data = reinterpret_cast<uint8_t*>((*m)->t1().SlotData(taken.slot));
  testing::FillPayload(1, data, 4096);
  const uint64_t sum = XXH3_64bits(data, 4096);
  protocol::WorkPublishItem item{K(1), std::nullopt, sum ^ 1, taken.slot, 4096};
  EXPECT_EQ(service.WorkPublish(*s, Tier::kT1, std::vector{item})[0].code, BlockCode::kBadChecksum);
  EXPECT_EQ(s->working_slots(), 1u);
  item.checksum = sum;
  EXPECT_EQ(service.WorkPublish(*s, Tier::kT1, std::vector{item})[0].code, BlockCode::kOk);
}

}  // namespace
}  // namespace kvtier
