// kernels/pattern.h: the reference is splitmix64 per word; the kernel writes the same bytes.
#include "tests/kernels/support/pattern.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/mix.h"
#include "tests/kernels/gpu_test_util.h"

namespace kvtier {
namespace {

TEST(Pattern, ReferenceIsSplitMixOfSeedPlusWordIndex) {
  std::vector<uint64_t> words(5);
  FillPatternReference(words.data(), words.size() * 8, 77);
  for (size_t w = 0; w < words.size(); ++w) EXPECT_EQ(words[w], SplitMix64Finalize(77 + w));
}

TEST(Pattern, ReferencePartialTailHoldsTheLowBytesOfTheNextWord) {
  unsigned char buf[19];
  std::memset(buf, 0xee, sizeof(buf));
  FillPatternReference(buf, 19, 5);
  const uint64_t w2 = SplitMix64Finalize(5 + 2);
  EXPECT_EQ(std::memcmp(buf + 16, &w2, 3), 0);
}

TEST(Pattern, KernelEqualsReferenceInDeviceAndMappedHostMemory) {
  KVTIER_REQUIRE_GPU();
  KVTIER_ASSERT_OK(gpu::SetDevice(0));
  auto stream = gpu::Stream::Create();
  KVTIER_ASSERT_OK(stream);
  for (size_t bytes : {size_t{8}, size_t{1000}, size_t{4096 + 5}, size_t{3 << 20}}) {
    std::vector<unsigned char> want(bytes), got(bytes, 0);
    FillPatternReference(want.data(), bytes, bytes);
    auto dev = gpu::DeviceAlloc(bytes);
    KVTIER_ASSERT_OK(dev);
    KVTIER_ASSERT_OK(FillPattern(*dev, bytes, bytes, stream->handle()));
    KVTIER_ASSERT_OK(gpu::CopyAsync(got.data(), *dev, bytes, stream->handle()));
    KVTIER_ASSERT_OK(stream->Synchronize());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), bytes), 0) << bytes << " bytes in device memory";
    KVTIER_ASSERT_OK(gpu::DeviceFree(*dev));

    std::vector<uint64_t> host((bytes + 7) / 8 + 512);
    KVTIER_ASSERT_OK(gpu::HostRegister(host.data(), host.size() * 8));
    auto mapped = gpu::DevicePointerOf(host.data());
    KVTIER_ASSERT_OK(mapped);
    KVTIER_ASSERT_OK(FillPattern(*mapped, bytes, bytes, stream->handle()));
    KVTIER_ASSERT_OK(stream->Synchronize());
    EXPECT_EQ(std::memcmp(want.data(), host.data(), bytes), 0)
        << bytes << " bytes in mapped host memory";
    KVTIER_ASSERT_OK(gpu::HostUnregister(host.data()));
  }
}

TEST(Pattern, MisalignedDestinationIsRefused) {
  KVTIER_REQUIRE_GPU();
  auto dev = gpu::DeviceAlloc(64);
  KVTIER_ASSERT_OK(dev);
  auto st = FillPattern(static_cast<char*>(*dev) + 1, 8, 0, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  KVTIER_ASSERT_OK(gpu::DeviceFree(*dev));
}

}  // namespace
}  // namespace kvtier
