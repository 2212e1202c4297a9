// T0, the GPU HBM tier: options are checked with errors naming the setting; the CPU variant
// refuses to create it; on a GPU the pool is sized from the options or the device's free memory,
// hands out every slot once, and moves payloads between registered host memory and the device
// byte-exactly. Transfers under load and across processes: device_tier_transfer_test.cc.
#include "tiers/device_tier.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "tests/kernels/gpu_test_util.h"
#include "tests/tiers/device_tier_test_util.h"

namespace kvtier {
namespace {

using device_tier_test::Completions;
using device_tier_test::FillPattern;
using device_tier_test::FirstDifference;
using device_tier_test::HostBuffer;

constexpr uint32_t kSlot = 64 * 1024;
constexpr uint32_t kSlots = 256;
constexpr uint64_t kPool = uint64_t{kSlots} * kSlot;  // 16 MiB: tests stay small and fast

DeviceTierOptions SmallOptions() {
  DeviceTierOptions o;
  o.device = 0;
  o.capacity_bytes = kPool;
  o.slot_bytes = kSlot;
  return o;
}

std::unique_ptr<DeviceTier> MakeTier(const DeviceTierOptions& options = SmallOptions()) {
  absl::StatusOr<std::unique_ptr<DeviceTier>> tier = DeviceTier::Create(options);
  EXPECT_TRUE(tier.ok()) << tier.status();
  return tier.ok() ? std::move(*tier) : nullptr;
}

void ExpectInvalid(const DeviceTierOptions& o, const std::string& key) {
  const absl::Status s = o.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key << ": " << s;
  EXPECT_NE(s.message().find(key), std::string::npos) << s;
}

TEST(DeviceTier, OptionsValidationNamesTheSetting) {
  EXPECT_TRUE(DeviceTierOptions{}.Validate().ok());
  EXPECT_TRUE(SmallOptions().Validate().ok());
  DeviceTierOptions o = SmallOptions();
  o.device = -1;
  ExpectInvalid(o, "t0.device");
  o = SmallOptions();
  o.slot_bytes = 0;
  ExpectInvalid(o, "t0.slot_bytes");
  o.slot_bytes = 4096 + 512;
  ExpectInvalid(o, "t0.slot_bytes");
  o = SmallOptions();
  o.capacity_bytes = kSlot - 4096;
  ExpectInvalid(o, "t0.capacity_bytes");
  for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
    o = SmallOptions();
    o.capacity_bytes = 0;
    o.free_fraction = bad;
    ExpectInvalid(o, "t0.free_fraction");
  }
  o.free_fraction = 1.0;
  EXPECT_TRUE(o.Validate().ok());
}

TEST(DeviceTier, CpuVariantCreateFailsWithFailedPrecondition) {
  if (std::string(gpu::BackendName()) != "none") GTEST_SKIP() << "GPU variant: see the tests below";
  absl::StatusOr<std::unique_ptr<DeviceTier>> tier = DeviceTier::Create(SmallOptions());
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(tier.status().code(), absl::StatusCode::kFailedPrecondition) << tier.status();
  EXPECT_NE(tier.status().message().find("t0"), std::string::npos) << tier.status();
  EXPECT_NE(tier.status().message().find("without a GPU backend"), std::string::npos)
      << tier.status();
  // Bad options are still reported as such, before the runtime is asked.
  DeviceTierOptions bad = SmallOptions();
  bad.slot_bytes = 100;
  EXPECT_EQ(DeviceTier::Create(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceTier, PoolIsWholeSlotsOfTheConfiguredCapacity) {
  KVTIER_REQUIRE_GPU();
  DeviceTierOptions o = SmallOptions();
  o.capacity_bytes = kPool + kSlot / 2;
  std::unique_ptr<DeviceTier> tier = MakeTier(o);
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(tier->tier(), Tier::kT0);
  EXPECT_EQ(tier->capacity_slots(), kSlots);
  EXPECT_EQ(tier->slot_bytes(), kSlot);
  EXPECT_EQ(tier->size(), kPool);
  ASSERT_NE(tier->base(), nullptr);
  EXPECT_EQ(tier->SlotData(3), static_cast<std::byte*>(tier->base()) + 3 * kSlot);
  const TierStats s = tier->Stats();
  EXPECT_EQ(s.capacity_slots, kSlots);
  EXPECT_EQ(s.slot_bytes, kSlot);
  EXPECT_EQ(s.used_slots, 0u);
}

TEST(DeviceTier, CapacityZeroTakesTheFreeFractionOfTheDevice) {
  KVTIER_REQUIRE_GPU();
  absl::StatusOr<gpu::DeviceInfo> info = gpu::GetDeviceInfo(0);
  KVTIER_ASSERT_OK(info);
  DeviceTierOptions o = SmallOptions();
  o.capacity_bytes = 0;
  o.free_fraction = 0.02;
  o.slot_bytes = 1 << 20;
  std::unique_ptr<DeviceTier> tier = MakeTier(o);
  ASSERT_NE(tier, nullptr);
  // Free memory moves with other users of the device; it never exceeds the total.
  const double limit = static_cast<double>(info->total_bytes) * o.free_fraction;
  EXPECT_GT(tier->capacity_slots(), 0u);
  EXPECT_LE(static_cast<double>(tier->size()), limit)
      << "pool " << tier->size() << " bytes, device total " << info->total_bytes;
  EXPECT_EQ(tier->size(), uint64_t{tier->capacity_slots()} * o.slot_bytes);
}

TEST(DeviceTier, CapacityAboveTheDevicesFreeMemoryIsResourceExhausted) {
  KVTIER_REQUIRE_GPU();
  absl::StatusOr<gpu::DeviceInfo> info = gpu::GetDeviceInfo(0);
  KVTIER_ASSERT_OK(info);
  DeviceTierOptions o = SmallOptions();
  o.capacity_bytes = (info->total_bytes / kSlot + 1) * kSlot;
  absl::StatusOr<std::unique_ptr<DeviceTier>> tier = DeviceTier::Create(o);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(tier.status().code(), absl::StatusCode::kResourceExhausted) << tier.status();
  EXPECT_NE(tier.status().message().find("t0.capacity_bytes"), std::string::npos) << tier.status();
}

TEST(DeviceTier, HandsOutEverySlotOnceThenIsExhaustedUntilAFree) {
  KVTIER_REQUIRE_GPU();
  std::unique_ptr<DeviceTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  std::set<SlotId> seen;
  for (uint32_t i = 0; i < kSlots; ++i) {
    absl::StatusOr<SlotId> slot = tier->Allocate();
    ASSERT_TRUE(slot.ok()) << "allocation " << i << ": " << slot.status();
    ASSERT_LT(*slot, kSlots);
    ASSERT_TRUE(seen.insert(*slot).second) << "slot " << *slot << " handed out twice";
  }
  EXPECT_EQ(tier->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  TierStats s = tier->Stats();
  EXPECT_EQ(s.used_slots, kSlots);
  EXPECT_EQ(s.rejected_allocations, 1u);
  tier->Free(17);
  absl::StatusOr<SlotId> again = tier->Allocate();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 17u);
  tier->Free(17);
  tier->Free(17);  // double free: refused and counted, the free set unchanged
  EXPECT_EQ(tier->double_frees(), 1u);
  EXPECT_EQ(tier->Stats().used_slots, kSlots - 1);
}

// Writes every slot from `src` (slot i from src + i * kSlot), then reads every slot into `dst`.
void WriteAllThenReadAll(DeviceTier& tier, const HostBuffer& src, HostBuffer& dst) {
  Completions writes;
  for (SlotId slot = 0; slot < kSlots; ++slot) {
    BlockRecord record;
    record.payload_bytes = kSlot;
    tier.Write(slot, record, src.data() + size_t{slot} * kSlot,
               writes.Callback(fmt::format("write of slot {}", slot)));
  }
  ASSERT_TRUE(writes.WaitFor(kSlots)) << writes.Describe();
  EXPECT_TRUE(writes.errors().empty()) << writes.Describe();
  Completions reads;
  for (SlotId slot = 0; slot < kSlots; ++slot) {
    tier.Read(slot, dst.data() + size_t{slot} * kSlot,
              reads.Callback(fmt::format("read of slot {}", slot)));
  }
  ASSERT_TRUE(reads.WaitFor(kSlots)) << reads.Describe();
  EXPECT_TRUE(reads.errors().empty()) << reads.Describe();
}

TEST(DeviceTier, PayloadsWrittenFromRegisteredHostMemoryReadBackIdentically) {
  KVTIER_REQUIRE_GPU();
  std::unique_ptr<DeviceTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  HostBuffer src(kPool), dst(kPool);
  KVTIER_ASSERT_OK(src.status());
  KVTIER_ASSERT_OK(dst.status());
  for (SlotId slot = 0; slot < kSlots; ++slot) {
    FillPattern(src.data() + size_t{slot} * kSlot, kSlot, /*seed=*/1, slot);
  }
  std::memset(dst.data(), 0, kPool);
  WriteAllThenReadAll(*tier, src, dst);
  for (SlotId slot = 0; slot < kSlots; ++slot) {
    ASSERT_EQ(FirstDifference(dst.data() + size_t{slot} * kSlot, kSlot, 1, slot), "");
  }
  const TierStats s = tier->Stats();
  EXPECT_EQ(s.writes, kSlots);
  EXPECT_EQ(s.write_bytes, kPool);
  EXPECT_EQ(s.reads, kSlots);
  EXPECT_EQ(s.read_bytes, kPool);
  EXPECT_EQ(s.write_errors + s.read_errors, 0u);
}

TEST(DeviceTier, PartialPayloadLandsAtTheStartOfItsSlot) {
  KVTIER_REQUIRE_GPU();
  std::unique_ptr<DeviceTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  HostBuffer src(kSlot), dst(kSlot);
  KVTIER_ASSERT_OK(src.status());
  KVTIER_ASSERT_OK(dst.status());
  FillPattern(src.data(), kSlot, /*seed=*/2, 5);  // the whole slot first
  Completions done;
  BlockRecord record;
  record.payload_bytes = kSlot;
  tier->Write(5, record, src.data(), done.Callback("full write"));
  ASSERT_TRUE(done.WaitFor(1)) << done.Describe();
  constexpr uint32_t kPart = 1000;  // not a multiple of anything
  FillPattern(src.data(), kPart, /*seed=*/3, 5);
  record.payload_bytes = kPart;
  tier->Write(5, record, src.data(), done.Callback("partial write"));
  // Reads and writes run on separate streams: a read waits for the write's `done` (as leases
  // ensure in the tier manager).
  ASSERT_TRUE(done.WaitFor(2)) << done.Describe();
  tier->Read(5, dst.data(), done.Callback("read"));
  ASSERT_TRUE(done.WaitFor(3)) << done.Describe();
  ASSERT_TRUE(done.errors().empty()) << done.Describe();
  EXPECT_EQ(FirstDifference(dst.data(), kPart, 3, 5), "");
  // The rest of the slot keeps the first payload.
  std::vector<std::byte> whole(kSlot);
  FillPattern(whole.data(), kSlot, 2, 5);
  EXPECT_EQ(std::memcmp(dst.data() + kPart, whole.data() + kPart, kSlot - kPart), 0);
  EXPECT_EQ(tier->Stats().write_bytes, uint64_t{kSlot} + kPart);
}

}  // namespace
}  // namespace kvtier
