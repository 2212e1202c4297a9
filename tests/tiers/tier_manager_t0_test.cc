// The tier manager with a T0 (GPU) tier: T0 settings are checked with errors naming them; Gets
// that target T0 promote T1 -> T0 (and T2 -> T1 -> T0) keeping the lower copy, one T0 copy per
// block however many Gets ask at once; T0 victims with a T1 copy leave without a copy back, victims
// without one are copied down to T1 first; leased T0 blocks stay; a drop frees the T0 slot. GPU
// tests skip without a device (CPU variant, CI). The suite is named DeviceTierManager so that the
// cuda and hip test presets (filter "DeviceTier") run it, and tsan's ("TierManager") too.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tests/kernels/gpu_test_util.h"
#include "tests/tiers/tier_manager_test_util.h"
#include "tiers/tier_manager.h"

namespace kvtier {
namespace {

using testing::FillPayload;
using testing::GetAndVerify;
using testing::InTier;
using testing::KeyOf;
using testing::kTestSlot;
using testing::ManagerOptions;
using testing::MoveLog;
using testing::Put;
using testing::SizeOf;
using testing::TempDir;

TierManagerOptions T0Options(uint32_t t1_slots, uint32_t t0_slots, const std::string& t2_dir = "",
                             uint32_t t2_slots = 0) {
  TierManagerOptions o = ManagerOptions(t1_slots, t2_dir, t2_slots);
  DeviceTierOptions t0;
  t0.capacity_bytes = uint64_t{kTestSlot} * t0_slots;
  t0.slot_bytes = kTestSlot;
  o.t0 = t0;
  o.t0_policy.high_watermark = 1.0;
  o.t0_policy.low_watermark = 0.75;
  o.t0_write_through = false;  // the tests that want it say so
  return o;
}

// A manager whose T1 is registered for DMA before the test copies from it (the daemon's path).
// Without a usable GPU registration fails or does nothing, and only the CPU-side tests run.
std::unique_ptr<TierManager> Make(const TierManagerOptions& options) {
  auto m = TierManager::Create(options);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  const absl::Status registered = (*m)->t1().dma().Wait();
  if (gpu::UnavailableReason().empty()) {
    EXPECT_TRUE(registered.ok()) << registered;
  }
  return std::move(*m);
}

absl::StatusOr<LeasedBlock> GetOnce(TierManager& m, const BlockKey& key, Tier target) {
  std::promise<absl::StatusOr<LeasedBlock>> p;
  m.Get(key, target, [&p](absl::StatusOr<LeasedBlock> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

// A T0 Get, retried while T0 is full of blocks on their way down (the evictor makes room).
absl::StatusOr<LeasedBlock> GetT0(TierManager& m, const BlockKey& key) {
  absl::StatusOr<LeasedBlock> r = GetOnce(m, key, Tier::kT0);
  for (int tries = 0; tries < 100 && r.status().code() == absl::StatusCode::kResourceExhausted;
       ++tries) {
    m.Quiesce();
    r = GetOnce(m, key, Tier::kT0);
  }
  return r;
}

// "" when the leased T0 block is block i's payload; else what differs.
std::string DiffT0(TierManager& m, uint64_t i, const LeasedBlock& block) {
  if (block.tier != Tier::kT0) return "the Get did not answer with a T0 block";
  const uint32_t bytes = SizeOf(i);
  if (block.payload_bytes != bytes) {
    return fmt::format("payload_bytes {} instead of {}", block.payload_bytes, bytes);
  }
  std::vector<uint8_t> want(bytes), got(bytes, 0);
  FillPayload(i, want.data(), bytes);
  absl::StatusOr<gpu::Stream> stream = gpu::Stream::Create();
  if (!stream.ok()) return stream.status().ToString();
  absl::Status s =
      gpu::CopyAsync(got.data(), m.t0()->SlotData(block.slot), bytes, stream->handle());
  if (s.ok()) s = stream->Synchronize();
  if (!s.ok()) return s.ToString();
  for (uint32_t b = 0; b < bytes; ++b) {
    if (got[b] != want[b]) {
      return fmt::format("block {} in T0 slot {}: byte {} of {} is 0x{:02x}, want 0x{:02x}", i,
                         block.slot, b, bytes, got[b], want[b]);
    }
  }
  return "";
}

// Gets block i into T0, checks its bytes there, releases it.
absl::Status GetT0AndVerify(TierManager& m, uint64_t i) {
  absl::StatusOr<LeasedBlock> block = GetT0(m, KeyOf(i));
  if (!block.ok()) return block.status();
  const std::string diff = DiffT0(m, i, *block);
  KVTIER_RETURN_IF_ERROR(m.Release(KeyOf(i)));
  if (!diff.empty()) return absl::DataLossError(diff);
  return absl::OkStatus();
}

TEST(DeviceTierManager, SettingsErrorsNameTheT0Key) {
  TierManagerOptions o = T0Options(8, 4);
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.t0->slot_bytes = kTestSlot * 2;
  EXPECT_NE(o.Validate().message().find("t0.slot_bytes"), std::string::npos) << o.Validate();
  o = T0Options(8, 4);
  o.t0->free_fraction = 2;
  o.t0->capacity_bytes = 0;
  EXPECT_NE(o.Validate().message().find("t0.free_fraction"), std::string::npos) << o.Validate();
  o = T0Options(8, 4);
  o.t0_policy.low_watermark = 0.99;
  o.t0_policy.high_watermark = 0.5;
  EXPECT_NE(o.Validate().message().find("t0.low_watermark"), std::string::npos) << o.Validate();
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceTierManager, WithoutT0AT0GetIsRefusedAndAT2GetIsInvalid) {
  auto m = Make(ManagerOptions(8, "", 0));
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(Put(*m, 1).ok());
  EXPECT_EQ(m->t0(), nullptr);
  EXPECT_EQ(GetOnce(*m, KeyOf(1), Tier::kT0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetOnce(*m, KeyOf(1), Tier::kT2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->index().Find(KeyOf(1))->leases, 0u);  // refused Gets hold nothing
  EXPECT_TRUE(GetAndVerify(*m, 1).ok());
}

TEST(DeviceTierManager, CpuVariantCannotStartAManagerWithT0) {
  if (std::string(gpu::BackendName()) != "none") GTEST_SKIP() << "GPU variant: see below";
  auto m = TierManager::Create(T0Options(8, 4));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
  EXPECT_NE(m.status().message().find("t0"), std::string::npos) << m.status();
}

TEST(DeviceTierManager, AT0GetPromotesFromT1AndKeepsTheT1Copy) {
  KVTIER_REQUIRE_GPU();
  MoveLog log;
  TierManagerOptions o = T0Options(16, 16);
  o.on_move = log.Observer();
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  for (uint64_t i = 0; i < 10; ++i) {
    const absl::Status s = GetT0AndVerify(*m, i);
    ASSERT_TRUE(s.ok()) << "block " << i << ": " << s;
    EXPECT_TRUE(InTier(*m, i, Tier::kT0) && InTier(*m, i, Tier::kT1)) << i;
  }
  const uint64_t copies = m->t0()->Stats().writes;
  EXPECT_EQ(copies, 10u);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(GetT0AndVerify(*m, i).ok()) << i;
  const TierManagerStats s = m->Stats();
  EXPECT_EQ(s.tier(Tier::kT0).gets_promoted, 10u);
  EXPECT_EQ(s.tier(Tier::kT0).hits, 10u);
  EXPECT_EQ(m->t0()->Stats().writes, copies) << "a block already in T0 was copied again";
  const std::vector<double> reported = log.Seconds(MoveKind::kPromotion, Tier::kT1, Tier::kT0);
  EXPECT_EQ(reported.size(), copies) << "one on_move report per T1 -> T0 copy";
  for (double seconds : reported) EXPECT_GT(seconds, 0);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_TRUE(GetAndVerify(*m, i).ok()) << i;  // T1 intact
}

TEST(DeviceTierManager, AT0GetOfABlockOnlyInT2GoesThroughT1) {
  KVTIER_REQUIRE_GPU();
  TempDir tmp;
  auto m = Make(T0Options(16, 8, tmp.path(), 256));
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  m->Quiesce();
  ASSERT_FALSE(InTier(*m, 0, Tier::kT1)) << "precondition: block 0 was demoted to T2";
  ASSERT_TRUE(InTier(*m, 0, Tier::kT2));
  const absl::Status s = GetT0AndVerify(*m, 0);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(InTier(*m, 0, Tier::kT0) && InTier(*m, 0, Tier::kT1) && InTier(*m, 0, Tier::kT2));
  EXPECT_EQ(m->Stats().tier(Tier::kT1).gets_promoted, 1u);
  EXPECT_EQ(m->Stats().tier(Tier::kT0).gets_promoted, 1u);
}

TEST(DeviceTierManager, ConcurrentT0GetsOfOneBlockMakeOneT0Copy) {
  KVTIER_REQUIRE_GPU();
  auto m = Make(T0Options(16, 16));
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(Put(*m, 5).ok());
  constexpr int kGets = 16;
  std::vector<absl::StatusOr<LeasedBlock>> got(kGets, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int t = 0; t < kGets; ++t) {
    threads.emplace_back([&, t] { got[t] = GetOnce(*m, KeyOf(5), Tier::kT0); });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kGets; ++t) {
    ASSERT_TRUE(got[t].ok()) << "get " << t << ": " << got[t].status();
    EXPECT_EQ(got[t]->slot, got[0]->slot) << "get " << t << " saw another T0 slot";
    EXPECT_EQ(DiffT0(*m, 5, *got[t]), "");
  }
  EXPECT_EQ(m->t0()->Stats().used_slots, 1u) << "one block, one T0 slot";
  EXPECT_EQ(m->index().Find(KeyOf(5))->leases, uint32_t{kGets});
  const TierManagerStats s = m->Stats();
  EXPECT_EQ(s.tier(Tier::kT0).hits + s.tier(Tier::kT0).gets_promoted, uint64_t{kGets});
  EXPECT_EQ(m->t0()->Stats().writes, 1u);  // joined, or found it there: never a second copy
  for (int t = 0; t < kGets; ++t) ASSERT_TRUE(m->Release(KeyOf(5)).ok());
}

TEST(DeviceTierManager, T0VictimsWithAT1CopyLeaveWithoutACopyBack) {
  KVTIER_REQUIRE_GPU();
  auto m = Make(T0Options(64, 4));
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 12; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  for (uint64_t i = 0; i < 12; ++i) {
    const absl::Status s = GetT0AndVerify(*m, i);
    ASSERT_TRUE(s.ok()) << "block " << i << ": " << s;
  }
  m->Quiesce();
  const TierManagerStats s = m->Stats();
  EXPECT_LE(m->t0()->Stats().used_slots, 4u);
  EXPECT_GE(s.tier(Tier::kT0).evictions, 8u);
  EXPECT_EQ(s.tier(Tier::kT0).clean_evictions, s.tier(Tier::kT0).evictions);
  EXPECT_EQ(s.tier(Tier::kT0).moved_down, 0u);
  EXPECT_EQ(m->t0()->Stats().reads, 0u) << "a clean T0 victim was copied back to T1";
  for (uint64_t i = 0; i < 12; ++i) EXPECT_TRUE(GetAndVerify(*m, i).ok()) << i;
}

TEST(DeviceTierManager, T0VictimsWithoutAT1CopyAreCopiedDownFirst) {
  KVTIER_REQUIRE_GPU();
  MoveLog log;
  TierManagerOptions o = T0Options(8, 4);  // no T2: T1 victims are dropped from T1
  o.on_move = log.Observer();
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(GetT0AndVerify(*m, i).ok()) << i;
  for (uint64_t i = 100; i < 116; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;  // pushes 0..3 out of T1
  m->Quiesce();
  int t0_only = 0;
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(InTier(*m, i, Tier::kT0)) << i;
    t0_only += InTier(*m, i, Tier::kT1) ? 0 : 1;
  }
  ASSERT_GT(t0_only, 0) << "precondition: some of blocks 0..3 left T1 and live only in T0";
  for (uint64_t i = 100; i < 116; ++i) (void)m->Drop(KeyOf(i));  // room in T1 for the copies
  for (uint64_t i = 200; i < 204; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  for (uint64_t i = 200; i < 204; ++i) {  // T0 is full of 0..3: they must make room
    const absl::Status s = GetT0AndVerify(*m, i);
    ASSERT_TRUE(s.ok()) << "block " << i << ": " << s;
  }
  m->Quiesce();
  const TierManagerStats s = m->Stats();
  EXPECT_GE(s.tier(Tier::kT0).moved_down, 1u);
  EXPECT_EQ(s.tier(Tier::kT0).move_down_failures, 0u);
  // Every copy down is reported, also one whose result a T1 Get's own copy made redundant.
  const std::vector<double> reported = log.Seconds(MoveKind::kDemotion, Tier::kT0, Tier::kT1);
  EXPECT_GE(reported.size(), s.tier(Tier::kT0).moved_down);
  for (double seconds : reported) EXPECT_GT(seconds, 0);
  for (uint64_t i = 0; i < 4; ++i) {  // in T1 (copied down), or still in T0 (read from there)
    const absl::Status got = GetAndVerify(*m, i);
    EXPECT_TRUE(got.ok()) << "block " << i << ": " << got;
  }
}

TEST(DeviceTierManager, LeasedT0BlocksStayAndADropFreesTheT0Slot) {
  KVTIER_REQUIRE_GPU();
  TierManagerOptions o = T0Options(16, 2);
  o.t0_policy.low_watermark = 1.0;  // the evictor leaves T0 alone: only Gets make room here
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  absl::StatusOr<LeasedBlock> b0 = GetT0(*m, KeyOf(0));
  absl::StatusOr<LeasedBlock> b1 = GetT0(*m, KeyOf(1));
  ASSERT_TRUE(b0.ok() && b1.ok()) << b0.status() << " " << b1.status();
  m->Quiesce();
  EXPECT_EQ(GetOnce(*m, KeyOf(2), Tier::kT0).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->index().Find(KeyOf(2))->leases, 0u);  // the failed Get gave its lease back
  EXPECT_EQ(DiffT0(*m, 0, *b0), "");
  EXPECT_EQ(DiffT0(*m, 1, *b1), "");
  ASSERT_TRUE(m->Release(KeyOf(0)).ok());
  ASSERT_TRUE(GetT0AndVerify(*m, 2).ok());  // block 0 made room
  EXPECT_FALSE(InTier(*m, 0, Tier::kT0));
  EXPECT_EQ(DiffT0(*m, 1, *b1), "");
  ASSERT_TRUE(m->Release(KeyOf(1)).ok());
  ASSERT_TRUE(m->Drop(KeyOf(2)).ok());
  m->Quiesce();
  EXPECT_EQ(m->t0()->Stats().used_slots, 1u);  // block 1's; block 2's slot went back
}

}  // namespace
}  // namespace kvtier

namespace kvtier {
namespace {

// Publishes block i as born in T0: a working slot filled from a T1 slot's bytes (registered host
// memory), as an engine's kernel would, published (protocol v3) and its publish lease released.
void PublishInT0(TierManager& m, uint64_t i) {
  absl::StatusOr<SlotId> staging = m.AllocateForPut();
  absl::StatusOr<SlotId> slot = m.AllocateForPut(Tier::kT0);
  ASSERT_TRUE(staging.ok() && slot.ok()) << staging.status() << slot.status();
  auto* data = reinterpret_cast<uint8_t*>(m.t1().SlotData(*staging));
  const uint32_t bytes = SizeOf(i);
  FillPayload(i, data, bytes);
  std::promise<absl::Status> copied;
  m.t0()->Write(*slot, BlockRecord{KeyOf(i), 3, bytes, 0}, data,
                [&copied](absl::Status s) { copied.set_value(s); });
  ASSERT_TRUE(copied.get_future().get().ok());
  ASSERT_TRUE(m.AbortPut(*staging).ok());
  PutCommit put{KeyOf(i), 3, bytes, XXH3_64bits(data, bytes), nullptr};
  put.tier = Tier::kT0;
  put.working = true;
  ASSERT_EQ(*m.CommitPut(put, *slot), CommitOutcome::kStored);
  ASSERT_TRUE(m.Release(KeyOf(i)).ok());  // the publish's lease
}

// A block born in T0 (a working slot published there, protocol v3) that no read copied down is
// written to T2 by a clean stop's flush, through T1, with the checksum given when it was published.
TEST(DeviceTierManager, AFlushWritesBlocksBornInT0ToT2) {
  KVTIER_REQUIRE_GPU();
  TempDir tmp;
  auto m = Make(T0Options(16, 4, tmp.path(), 64));
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_NO_FATAL_FAILURE(PublishInT0(*m, i));
    EXPECT_TRUE(InTier(*m, i, Tier::kT0));
    EXPECT_FALSE(InTier(*m, i, Tier::kT1));
  }
  ASSERT_TRUE(m->FlushT1(std::chrono::steady_clock::now() + std::chrono::seconds(60)));
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(InTier(*m, i, Tier::kT2)) << i;
    ASSERT_TRUE(GetAndVerify(*m, i).ok()) << i;
  }
  EXPECT_EQ(m->Stats().integrity_drops, 0u);
}

}  // namespace
}  // namespace kvtier

namespace kvtier {
namespace {

// Write-through (t0_write_through): blocks born in T0 get a T1 copy in the background and stay in
// T0; when T0 then needs room for promotions, they leave it without a copy back (the T1 hit's
// promotions never wait for a demotion), and their T1 copies hold their bytes.
TEST(DeviceTierManager, WriteThroughGivesBlocksBornInT0AT1CopySoTheyLeaveT0Clean) {
  KVTIER_REQUIRE_GPU();
  TierManagerOptions o = T0Options(32, 4);
  o.t0_write_through = true;
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(PublishInT0(*m, i));
  m->Quiesce();
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(InTier(*m, i, Tier::kT0)) << i;
    EXPECT_TRUE(InTier(*m, i, Tier::kT1)) << i << ": not written through";
  }
  EXPECT_EQ(m->Stats().tier(Tier::kT0).written_through, 4u);
  EXPECT_EQ(m->t0()->Stats().reads, 4u);
  for (uint64_t i = 10; i < 14; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;
  for (uint64_t i = 10; i < 14; ++i) {  // T0 is full of 0..3, all clean
    const absl::Status s = GetT0AndVerify(*m, i);
    ASSERT_TRUE(s.ok()) << "block " << i << ": " << s;
  }
  m->Quiesce();
  const TierManagerStats s = m->Stats();
  EXPECT_EQ(s.tier(Tier::kT0).moved_down, 0u);
  EXPECT_GE(s.tier(Tier::kT0).clean_evictions, 4u);
  EXPECT_EQ(m->t0()->Stats().reads, 4u) << "a T0 victim was copied down again";
  for (uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(GetAndVerify(*m, i).ok()) << i;
  EXPECT_EQ(s.integrity_drops, 0u);
}

// A block dropped while its write-through copy is under way frees both slots; one born when T1
// has no free slot is copied once T1 has room (its evictor makes it), never lost from T0.
TEST(DeviceTierManager, WriteThroughSurvivesDropsAndAFullT1) {
  KVTIER_REQUIRE_GPU();
  TierManagerOptions o = T0Options(4, 8);  // no T2: T1 sheds by dropping
  o.t0_write_through = true;
  auto m = Make(o);
  ASSERT_NE(m, nullptr);
  for (uint64_t i = 100; i < 104; ++i) ASSERT_TRUE(Put(*m, i).ok()) << i;  // T1 full
  for (uint64_t i = 0; i < 8; ++i) ASSERT_NO_FATAL_FAILURE(PublishInT0(*m, i));
  ASSERT_TRUE(m->Drop(KeyOf(7)).ok());
  m->Quiesce();
  for (uint64_t i = 0; i < 7; ++i) EXPECT_TRUE(InTier(*m, i, Tier::kT0)) << i;
  EXPECT_FALSE(m->index().Find(KeyOf(7)).has_value());
  EXPECT_EQ(m->t0()->Stats().used_slots, 7u);
  const uint64_t t1_used = m->t1().Stats().used_slots;
  EXPECT_LE(t1_used, 4u);
  for (uint64_t i = 0; i < 7; ++i) {
    const absl::Status s = GetT0AndVerify(*m, i);
    EXPECT_TRUE(s.ok()) << "block " << i << ": " << s;
  }
}

}  // namespace
}  // namespace kvtier
