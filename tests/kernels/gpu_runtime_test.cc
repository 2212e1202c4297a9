// The GPU runtime wrappers: the CPU variant says plainly that it has no backend; a GPU variant on
// a machine with a device allocates, copies, orders work with events and pins host memory.
#include "kernels/gpu_runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "kernels/descriptor_ring.h"
#include "tests/kernels/gpu_test_util.h"

namespace kvtier::gpu {
namespace {

TEST(GpuRuntime, BackendNameMatchesTheBuildVariant) {
  EXPECT_EQ(std::string(BackendName()), KVTIER_GPU_BACKEND_NAME);  // from CMake's variant
}

TEST(GpuRuntime, CpuVariantRefusesDeviceCallsWithAClearError) {
  if (std::string(BackendName()) != "none")
    GTEST_SKIP() << "GPU variant: covered by the tests below";
  auto count = DeviceCount();
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(count.status().message().find("without a GPU backend"), std::string::npos);
  EXPECT_FALSE(DeviceAlloc(4096).ok());
  EXPECT_FALSE(Stream::Create().ok());
  EXPECT_TRUE(DeviceFree(nullptr).ok());
  EXPECT_FALSE(UnavailableReason().empty());
}

TEST(GpuRuntime, DeviceInfoIsFilledIn) {
  KVTIER_REQUIRE_GPU();
  auto info = GetDeviceInfo(0);
  KVTIER_ASSERT_OK(info);
  EXPECT_FALSE(info->name.empty());
  EXPECT_FALSE(info->pci_bus_id.empty());
  EXPECT_GT(info->total_bytes, 0u);
  EXPECT_GT(info->warp_size, 0);
  EXPECT_GT(info->multiprocessors, 0);
}

TEST(GpuRuntime, CopiesRoundTripThroughDeviceMemoryInStreamOrder) {
  KVTIER_REQUIRE_GPU();
  KVTIER_ASSERT_OK(SetDevice(0));
  constexpr size_t kBytes = (1 << 20) + 13;
  std::vector<unsigned char> src(kBytes), dst(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  auto dev = DeviceAlloc(kBytes);
  KVTIER_ASSERT_OK(dev);
  auto stream = Stream::Create();
  KVTIER_ASSERT_OK(stream);
  auto done = Event::Create();
  KVTIER_ASSERT_OK(done);
  KVTIER_ASSERT_OK(CopyAsync(*dev, src.data(), kBytes, stream->handle()));
  KVTIER_ASSERT_OK(CopyAsync(dst.data(), *dev, kBytes, stream->handle()));
  KVTIER_ASSERT_OK(done->Record(stream->handle()));
  KVTIER_ASSERT_OK(done->Synchronize());
  auto is_done = done->Done();
  KVTIER_ASSERT_OK(is_done);
  EXPECT_TRUE(*is_done);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kBytes), 0);
  KVTIER_ASSERT_OK(DeviceFree(*dev));
}

TEST(GpuRuntime, RegisteredHostMemoryIsReachableFromTheDevice) {
  KVTIER_REQUIRE_GPU();
  KVTIER_ASSERT_OK(SetDevice(0));
  constexpr size_t kBytes = 4 << 20;
  void* host = std::aligned_alloc(4096, kBytes);
  ASSERT_NE(host, nullptr);
  std::memset(host, 0x5a, kBytes);
  KVTIER_ASSERT_OK(HostRegister(host, kBytes));
  auto dptr = DevicePointerOf(host);
  KVTIER_ASSERT_OK(dptr);
  auto dev = DeviceAlloc(kBytes);
  KVTIER_ASSERT_OK(dev);
  std::vector<CopyOp> ops = {
      {*dev, *dptr, kBytes / 2},
      {static_cast<char*>(*dev) + kBytes / 2, static_cast<char*>(host) + kBytes / 2, kBytes / 2}};
  auto stream = Stream::Create();
  KVTIER_ASSERT_OK(stream);
  KVTIER_ASSERT_OK(CopyBatchAsync(ops, stream->handle()));
  std::vector<unsigned char> back(kBytes, 0);
  KVTIER_ASSERT_OK(CopyAsync(back.data(), *dev, kBytes, stream->handle()));
  KVTIER_ASSERT_OK(stream->Synchronize());
  EXPECT_EQ(std::memcmp(back.data(), host, kBytes), 0);
  KVTIER_ASSERT_OK(DeviceFree(*dev));
  KVTIER_ASSERT_OK(HostUnregister(host));
  std::free(host);
}

TEST(GpuRuntime, StreamWaitEventOrdersWorkAcrossStreams) {
  KVTIER_REQUIRE_GPU();
  KVTIER_ASSERT_OK(SetDevice(0));
  constexpr size_t kBytes = 64 << 20;
  auto a = DeviceAlloc(kBytes), b = DeviceAlloc(kBytes);
  KVTIER_ASSERT_OK(a);
  KVTIER_ASSERT_OK(b);
  auto s1 = Stream::Create(), s2 = Stream::Create();
  KVTIER_ASSERT_OK(s1);
  KVTIER_ASSERT_OK(s2);
  auto ev = Event::Create();
  KVTIER_ASSERT_OK(ev);
  std::vector<unsigned char> back(kBytes);
  for (int round = 0; round < 20; ++round) {
    const int value = round + 1;
    KVTIER_ASSERT_OK(MemsetAsync(*a, value, kBytes, s1->handle()));
    KVTIER_ASSERT_OK(ev->Record(s1->handle()));
    KVTIER_ASSERT_OK(StreamWaitEvent(s2->handle(), *ev));
    KVTIER_ASSERT_OK(CopyAsync(*b, *a, kBytes, s2->handle()));
    KVTIER_ASSERT_OK(CopyAsync(back.data(), *b, kBytes, s2->handle()));
    KVTIER_ASSERT_OK(s2->Synchronize());
    ASSERT_EQ(back[0], value);
    ASSERT_EQ(back[kBytes - 1], value) << "round " << round;
  }
  KVTIER_ASSERT_OK(DeviceFree(*a));
  KVTIER_ASSERT_OK(DeviceFree(*b));
}

// Reserve allocates the slots a client's first launches need before they run (the first put paid
// eight pinned allocations on its path before), and Acquire serves from them without adding any;
// what Upload sends is what the device buffer then holds.
TEST(DescriptorRing, ReservedSlotsServeLaunchesWithoutAllocatingMore) {
  KVTIER_REQUIRE_GPU();
  KVTIER_ASSERT_OK(SetDevice(0));
  DescriptorRing ring;
  KVTIER_ASSERT_OK(ring.Reserve(4, 8192));
  EXPECT_EQ(ring.slots(), 4u);
  auto stream = Stream::Create();
  KVTIER_ASSERT_OK(stream);
  std::set<void*> staging_seen;
  std::vector<unsigned char> back(8192);
  for (int round = 0; round < 12; ++round) {
    auto staging = ring.Acquire(8192);
    KVTIER_ASSERT_OK(staging);
    staging_seen.insert(*staging);
    std::memset(*staging, round + 1, 8192);
    KVTIER_ASSERT_OK(ring.Upload(8192, stream->handle()));
    KVTIER_ASSERT_OK(CopyAsync(back.data(), ring.device(), 8192, stream->handle()));
    KVTIER_ASSERT_OK(ring.Retire(stream->handle()));
    KVTIER_ASSERT_OK(stream->Synchronize());
    ASSERT_EQ(back[0], round + 1);
    ASSERT_EQ(back[8191], round + 1);
  }
  EXPECT_EQ(ring.slots(), 4u);
  EXPECT_LE(staging_seen.size(), 4u);
  // Reserve never shrinks, and stops at kMaxSlots.
  KVTIER_ASSERT_OK(ring.Reserve(2, 4096));
  EXPECT_EQ(ring.slots(), 4u);
  KVTIER_ASSERT_OK(ring.Reserve(DescriptorRing::kMaxSlots + 5, 4096));
  EXPECT_EQ(ring.slots(), DescriptorRing::kMaxSlots);
}

}  // namespace
}  // namespace kvtier::gpu
