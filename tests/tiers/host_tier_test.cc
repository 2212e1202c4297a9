#include "tiers/host_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kvtier {
namespace {

constexpr uint32_t kSlot = 64 * 1024;
constexpr uint64_t kCapacity = 16 << 20;  // 256 slots; tests stay small and fast

HostTierOptions SmallOptions() {
  HostTierOptions o;
  o.capacity_bytes = kCapacity;
  o.slot_bytes = kSlot;
  o.touch_threads = 2;
  o.dma_chunk_bytes = 4 << 20;
  return o;
}

std::unique_ptr<HostTier> MakeTier(const HostTierOptions& options = SmallOptions()) {
  absl::StatusOr<std::unique_ptr<HostTier>> tier = HostTier::Create(options);
  EXPECT_TRUE(tier.ok()) << tier.status();
  return tier.ok() ? std::move(*tier) : nullptr;
}

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

absl::Status WriteSync(HostTier& tier, SlotId slot, const std::vector<uint8_t>& data) {
  BlockRecord record;
  record.payload_bytes = static_cast<uint32_t>(data.size());
  absl::Status result = absl::UnknownError("done not called");
  tier.Write(slot, record, data.data(), [&](absl::Status s) { result = std::move(s); });
  return result;  // T1 completes inline
}

absl::Status ReadSync(HostTier& tier, SlotId slot, std::vector<uint8_t>& out) {
  out.assign(tier.slot_bytes(), 0);
  absl::Status result = absl::UnknownError("done not called");
  tier.Read(slot, out.data(), [&](absl::Status s) { result = std::move(s); });
  return result;
}

int NumaNodesInSysfs() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node")) {
    if (e.path().filename().string().rfind("node", 0) == 0) ++n;
  }
  return n;
}

TEST(HostTierTest, SegmentHasTheConfiguredShapeAndPlacement) {
  std::unique_ptr<HostTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(tier->tier(), Tier::kT1);
  EXPECT_EQ(tier->slot_bytes(), kSlot);
  EXPECT_EQ(tier->capacity_slots(), kCapacity / kSlot);
  EXPECT_EQ(tier->size(), kCapacity);
  EXPECT_GE(tier->fd(), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tier->base()) % 4096, 0u);
  const HostTierPlacement& where = tier->placement();
  EXPECT_GE(where.numa_node, 0);
  if (NumaNodesInSysfs() == 1) {
    EXPECT_EQ(where.numa_node, 0);
  }
  EXPECT_FALSE(where.numa_why.empty());
  EXPECT_GE(where.page_bytes, 4096u);
  // Registration: done quickly; the CPU build registers nothing and says OK.
  EXPECT_TRUE(tier->dma().total_bytes() == kCapacity);
  absl::Status reg = tier->dma().Wait();
  if (DmaRegistration::BackendAvailable()) {
    if (reg.ok()) {
      EXPECT_EQ(tier->dma().registered_bytes(), kCapacity);
    }
  } else {
    EXPECT_TRUE(reg.ok()) << reg;
    EXPECT_EQ(tier->dma().registered_bytes(), 0u);
  }
}

TEST(HostTierTest, AllocatesEveryDistinctSlotInRangeThenResourceExhausted) {
  std::unique_ptr<HostTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  std::set<SlotId> seen;
  for (uint32_t i = 0; i < tier->capacity_slots(); ++i) {
    absl::StatusOr<SlotId> slot = tier->Allocate();
    ASSERT_TRUE(slot.ok()) << slot.status();
    ASSERT_LT(*slot, tier->capacity_slots());
    ASSERT_TRUE(seen.insert(*slot).second);
    const std::byte* data = tier->SlotData(*slot);
    EXPECT_GE(data, tier->base());
    EXPECT_LE(data + kSlot, tier->base() + tier->size());
  }
  EXPECT_EQ(tier->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.used_slots, tier->capacity_slots());
  EXPECT_EQ(stats.rejected_allocations, 1u);
  tier->Free(*seen.begin());
  EXPECT_TRUE(tier->Allocate().ok());
}

TEST(HostTierTest, RandomPayloadsRoundTrip) {
  std::unique_ptr<HostTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  const std::vector<size_t> sizes = {1, 4096, kSlot - 1, kSlot};
  std::vector<std::pair<SlotId, std::vector<uint8_t>>> stored;
  for (size_t i = 0; i < 40; ++i) {
    const SlotId slot = *tier->Allocate();
    stored.emplace_back(slot, RandomBytes(sizes[i % sizes.size()], i));
    ASSERT_TRUE(WriteSync(*tier, slot, stored.back().second).ok());
  }
  std::vector<uint8_t> out;
  for (const auto& [slot, payload] : stored) {
    ASSERT_TRUE(ReadSync(*tier, slot, out).ok());
    ASSERT_EQ(0, std::memcmp(out.data(), payload.data(), payload.size())) << "slot " << slot;
    ASSERT_EQ(0, std::memcmp(tier->SlotData(slot), payload.data(), payload.size()));
  }
  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.writes, 40u);
  EXPECT_EQ(stats.reads, 40u);
  EXPECT_EQ(stats.read_bytes, 40u * kSlot);
}

TEST(HostTierTest, BadSlotOrOversizedPayloadIsAnErrorNotACrash) {
  std::unique_ptr<HostTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  const SlotId slot = *tier->Allocate();
  EXPECT_EQ(WriteSync(*tier, slot, std::vector<uint8_t>(kSlot + 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSync(*tier, tier->capacity_slots(), std::vector<uint8_t>(16)).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> out;
  EXPECT_EQ(ReadSync(*tier, kNoSlot, out).code(), absl::StatusCode::kInvalidArgument);
  tier->Free(slot);
  tier->Free(slot);  // double free: refused, logged, counted
  EXPECT_EQ(tier->double_frees(), 1u);
  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.write_errors, 2u);
  EXPECT_EQ(stats.read_errors, 1u);
  EXPECT_EQ(stats.used_slots, 0u);
}

// What a client does with the fd it receives over SCM_RIGHTS: map it and share the bytes both ways.
TEST(HostTierTest, ForkedChildMappingTheFdSharesBytesBothWays) {
  std::unique_ptr<HostTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  const SlotId parent_slot = *tier->Allocate();
  const SlotId child_slot = *tier->Allocate();
  const std::vector<uint8_t> from_parent = RandomBytes(kSlot, 1);
  const std::vector<uint8_t> from_child = RandomBytes(kSlot, 2);
  ASSERT_TRUE(WriteSync(*tier, parent_slot, from_parent).ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A fresh mapping of the fd, not the inherited one: the way another process would see it.
    void* p = mmap(nullptr, tier->size(), PROT_READ | PROT_WRITE, MAP_SHARED, tier->fd(), 0);
    if (p == MAP_FAILED) _exit(2);
    auto* bytes = static_cast<uint8_t*>(p);
    if (std::memcmp(bytes + size_t{parent_slot} * kSlot, from_parent.data(), kSlot) != 0) _exit(3);
    std::memcpy(bytes + size_t{child_slot} * kSlot, from_child.data(), kSlot);
    munmap(p, tier->size());
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  ASSERT_EQ(WEXITSTATUS(wstatus), 0) << "2: mmap failed, 3: child saw other bytes";
  std::vector<uint8_t> out;
  ASSERT_TRUE(ReadSync(*tier, child_slot, out).ok());
  EXPECT_EQ(out, from_child);
}

// A client holding the fd cannot shrink or grow the segment under the daemon (which would turn
// the daemon's next access into a SIGBUS).
TEST(HostTierTest, TheSegmentIsSealedAgainstResizing) {
  std::unique_ptr<HostTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  EXPECT_NE(ftruncate(tier->fd(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(tier->fd(), static_cast<off_t>(tier->size() * 2)), 0);
  const int seals = fcntl(tier->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
}

// Several threads allocate, write, read back and free at once (also run under ThreadSanitizer).
TEST(HostTierTest, ConcurrentAllocateWriteReadFreeKeepsEveryPayload) {
  std::unique_ptr<HostTier> tier = MakeTier();
  ASSERT_NE(tier, nullptr);
  constexpr int kThreads = 4;
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> out;
      for (int i = 0; i < 300; ++i) {
        absl::StatusOr<SlotId> slot = tier->Allocate();
        if (!slot.ok()) {
          errors.fetch_add(1);
          continue;
        }
        const std::vector<uint8_t> payload(kSlot / 4, static_cast<uint8_t>(t * 31 + i));
        if (!WriteSync(*tier, *slot, payload).ok()) errors.fetch_add(1);
        if (!ReadSync(*tier, *slot, out).ok()) errors.fetch_add(1);
        if (std::memcmp(out.data(), payload.data(), payload.size()) != 0) mismatches.fetch_add(1);
        tier->Free(*slot);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.used_slots, 0u);
  EXPECT_EQ(stats.writes, kThreads * 300u);
  EXPECT_EQ(tier->double_frees(), 0u);
}

TEST(HostTierTest, BadConfigErrorsNameTheSetting) {
  struct Case {
    void (*edit)(HostTierOptions&);
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](HostTierOptions& o) {
         o.capacity_bytes = 1000000;
         o.slot_bytes = 262144;
       },
       "t1.capacity_bytes: 1000000 is not a multiple of t1.slot_bytes (262144)"},
      {[](HostTierOptions& o) { o.capacity_bytes = 0; }, "t1.capacity_bytes"},
      {[](HostTierOptions& o) { o.slot_bytes = 1000; }, "t1.slot_bytes: 1000"},
      {[](HostTierOptions& o) { o.slot_bytes = 0; }, "t1.slot_bytes"},
      {[](HostTierOptions& o) { o.dma_chunk_bytes = 12345; }, "t1.dma_chunk_bytes: 12345"},
      {[](HostTierOptions& o) { o.touch_threads = 100000; }, "t1.touch_threads"},
      {[](HostTierOptions& o) { o.numa_pci_bus_id = "gpu0"; }, "t1.numa_pci_bus_id"},
      {[](HostTierOptions& o) {
         o.huge_pages = HugePages::kOn;
         o.capacity_bytes = 3 * kSlot;
       },
       "t1.huge_pages"},
      {[](HostTierOptions& o) {
         o.capacity_bytes = uint64_t{1} << 45;
         o.slot_bytes = 4096;
       },
       "t1.capacity_bytes"},  // 2^33 slots: more than a SlotId addresses
  };
  for (const Case& c : cases) {
    HostTierOptions o = SmallOptions();
    c.edit(o);
    absl::StatusOr<std::unique_ptr<HostTier>> tier = HostTier::Create(o);
    ASSERT_FALSE(tier.ok()) << c.expected;
    EXPECT_EQ(tier.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(tier.status().message().find(c.expected), absl::string_view::npos)
        << tier.status() << "\nexpected: " << c.expected;
  }
  EXPECT_TRUE(SmallOptions().Validate().ok());
  EXPECT_TRUE(HostTierOptions().Validate().ok());
}

int ReservedHugePages() {
  std::ifstream in("/proc/sys/vm/nr_hugepages");
  int n = 0;
  in >> n;
  return n;
}

TEST(HostTierTest, HugePageFallbackIsLoggedWithHowToEnable) {
  testing::internal::CaptureStderr();
  std::unique_ptr<HostTier> tier = MakeTier();
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_NE(tier, nullptr);
  if (tier->placement().huge_pages) GTEST_SKIP() << "this machine has huge pages: no fallback";
  EXPECT_EQ(tier->placement().page_bytes, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_NE(log.find("huge pages unavailable"), std::string::npos) << log;
  EXPECT_NE(log.find("vm.nr_hugepages"), std::string::npos) << log;
  EXPECT_NE(log.find("NUMA node"), std::string::npos) << log;
}

TEST(HostTierTest, HugePagesOnFailsAtStartWhenNoneAreReserved) {
  if (ReservedHugePages() >= static_cast<int>(kCapacity >> 21)) GTEST_SKIP() << "huge pages here";
  HostTierOptions o = SmallOptions();
  o.huge_pages = HugePages::kOn;
  absl::StatusOr<std::unique_ptr<HostTier>> tier = HostTier::Create(o);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(tier.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tier.status().message().find("t1.huge_pages"), absl::string_view::npos);
}

TEST(HostTierTest, CapacityBeyondThePhysicalMemoryFailsAtStart) {
  HostTierOptions o = SmallOptions();
  o.capacity_bytes = uint64_t{1} << 44;  // 16 TiB
  o.dma_chunk_bytes = kSlot;
  absl::StatusOr<std::unique_ptr<HostTier>> tier = HostTier::Create(o);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(tier.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(tier.status().message().find("t1.capacity_bytes"), absl::string_view::npos)
      << tier.status();
}

TEST(HostTierTest, HugePagesOffUsesNormalPages) {
  HostTierOptions o = SmallOptions();
  o.huge_pages = HugePages::kOff;
  std::unique_ptr<HostTier> tier = MakeTier(o);
  ASSERT_NE(tier, nullptr);
  EXPECT_FALSE(tier->placement().huge_pages);
}

TEST(HostTierTest, UnknownPciDeviceFallsBackToANodeAndSaysWhy) {
  HostTierOptions o = SmallOptions();
  o.numa_pci_bus_id = "0000:ff:1f.7";
  std::unique_ptr<HostTier> tier = MakeTier(o);
  ASSERT_NE(tier, nullptr);
  EXPECT_GE(tier->placement().numa_node, 0);
  EXPECT_NE(tier->placement().numa_why.find("0000:ff:1f.7 not found"), std::string::npos)
      << tier->placement().numa_why;
}

// A storage, network or display device, which hwloc keeps in its topology, or "" when none.
std::string FirstImportantPciDevice() {
  for (const auto& e : std::filesystem::directory_iterator("/sys/bus/pci/devices")) {
    std::ifstream in(e.path() / "class");
    std::string cls;
    in >> cls;  // "0x020000": base class in the first two hex digits
    if (cls.rfind("0x01", 0) == 0 || cls.rfind("0x02", 0) == 0 || cls.rfind("0x03", 0) == 0) {
      return e.path().filename().string();
    }
  }
  return "";
}

TEST(HostTierTest, KnownPciDevicePlacesTheSegmentOnItsNode) {
  const std::string bus_id = FirstImportantPciDevice();
  if (bus_id.empty()) GTEST_SKIP() << "no storage, network or display PCI device here";
  HostTierOptions o = SmallOptions();
  o.numa_pci_bus_id = bus_id;
  std::unique_ptr<HostTier> tier = MakeTier(o);
  ASSERT_NE(tier, nullptr);
  EXPECT_NE(tier->placement().numa_why.find("nearest PCI device " + bus_id), std::string::npos)
      << tier->placement().numa_why;
  std::ifstream node_file("/sys/bus/pci/devices/" + bus_id + "/numa_node");
  int node = -1;
  node_file >> node;
  if (node >= 0) {
    EXPECT_EQ(tier->placement().numa_node, node);
  }
}

}  // namespace
}  // namespace kvtier
