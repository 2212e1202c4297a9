// GpuChecksummer (kernels/gpu_checksum.h) on a GPU against XXH3_64bits on the CPU: every length
// 0-1300 (all of XXH3's short paths and the long loop's first blocks), lengths around every 1 KiB
// XXH3 block boundary up to 2 MiB + 1, unaligned payloads, payloads in device and in mapped host
// memory, and engine blocks of every paged layout hashed in place against the CPU hash of the
// payload CopyKvReference gathers. In the CPU variant Create says there is no backend and the GPU
// tests skip with the reason.
#include "kernels/gpu_checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kv_copy.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/kv_test_util.h"

namespace kvtier {
namespace {

std::vector<unsigned char> RandomBytes(size_t n, uint32_t seed) {
  std::vector<unsigned char> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// Hashes host `data` at each (offset, length) on the GPU after copying it to device memory at
// `misalign` bytes past an aligned address; compares with XXH3_64bits.
void ExpectPayloadsMatch(const std::vector<unsigned char>& data,
                         const std::vector<std::pair<size_t, uint32_t>>& pieces, size_t misalign) {
  auto checksummer = GpuChecksummer::Create();
  KVTIER_ASSERT_OK(checksummer);
  auto stream = gpu::Stream::Create();
  KVTIER_ASSERT_OK(stream);
  auto dev = gpu::DeviceAlloc(data.size() + misalign + 8);
  KVTIER_ASSERT_OK(dev);
  auto out = gpu::DeviceAlloc(pieces.size() * sizeof(uint64_t));
  KVTIER_ASSERT_OK(out);
  char* base = static_cast<char*>(*dev) + misalign;
  KVTIER_ASSERT_OK(gpu::CopyAsync(base, data.data(), data.size(), stream->handle()));
  std::vector<const void*> ptrs;
  std::vector<uint32_t> lens;
  for (const auto& [off, len] : pieces) {
    ptrs.push_back(base + off);
    lens.push_back(len);
  }
  KVTIER_ASSERT_OK(
      (*checksummer)->Payloads(ptrs, lens, static_cast<uint64_t*>(*out), stream->handle()));
  std::vector<uint64_t> got(pieces.size());
  KVTIER_ASSERT_OK(gpu::CopyAsync(got.data(), *out, got.size() * 8, stream->handle()));
  KVTIER_ASSERT_OK(stream->Synchronize());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint64_t want = XXH3_64bits(data.data() + pieces[i].first, pieces[i].second);
    ASSERT_EQ(got[i], want) << "length " << pieces[i].second << " at offset " << pieces[i].first
                            << ", misalign " << misalign;
  }
  (void)gpu::DeviceFree(*dev);
  (void)gpu::DeviceFree(*out);
}

TEST(GpuChecksumTest, EveryLengthUpTo1300EqualsXxh3) {
  KVTIER_REQUIRE_GPU();
  const auto data = RandomBytes(1400, 1);
  for (size_t misalign : {0, 1, 3, 8}) {
    std::vector<std::pair<size_t, uint32_t>> pieces;
    for (uint32_t len = 0; len <= 1300; ++len) pieces.push_back({len % 61, len});
    ExpectPayloadsMatch(data, pieces, misalign);
  }
}

TEST(GpuChecksumTest, LengthsAroundBlockBoundariesUpTo2MiBEqualXxh3) {
  KVTIER_REQUIRE_GPU();
  const size_t max = (size_t{2} << 20) + 1;
  const auto data = RandomBytes(max + 64, 2);
  std::vector<std::pair<size_t, uint32_t>> pieces;
  for (size_t k : {1, 2, 3, 7, 16, 31, 32, 33, 63, 64, 65, 255, 1000, 2047, 2048}) {
    for (int d : {-65, -64, -1, 0, 1, 63, 64}) {
      pieces.push_back({0, static_cast<uint32_t>(k * 1024 + d)});
      pieces.push_back({5, static_cast<uint32_t>(k * 1024 + d)});
    }
  }
  pieces.push_back({0, static_cast<uint32_t>(max)});
  ExpectPayloadsMatch(data, pieces, 0);
}

TEST(GpuChecksumTest, MappedHostPayloadsEqualXxh3) {
  KVTIER_REQUIRE_GPU();
  const size_t bytes = size_t{1} << 20;
  void* host = std::aligned_alloc(4096, bytes);
  ASSERT_NE(host, nullptr);
  const auto data = RandomBytes(bytes, 3);
  std::memcpy(host, data.data(), bytes);
  KVTIER_ASSERT_OK(gpu::HostRegister(host, bytes));
  auto dev_ptr = gpu::DevicePointerOf(host);
  KVTIER_ASSERT_OK(dev_ptr);
  auto checksummer = GpuChecksummer::Create();
  KVTIER_ASSERT_OK(checksummer);
  auto stream = gpu::Stream::Create();
  KVTIER_ASSERT_OK(stream);
  auto out = gpu::DeviceAlloc(2 * sizeof(uint64_t));
  KVTIER_ASSERT_OK(out);
  const void* ptrs[] = {*dev_ptr, static_cast<char*>(*dev_ptr) + 100};
  const uint32_t lens[] = {static_cast<uint32_t>(bytes), 4097};
  KVTIER_ASSERT_OK(
      (*checksummer)->Payloads(ptrs, lens, static_cast<uint64_t*>(*out), stream->handle()));
  uint64_t got[2];
  KVTIER_ASSERT_OK(gpu::CopyAsync(got, *out, sizeof(got), stream->handle()));
  KVTIER_ASSERT_OK(stream->Synchronize());
  EXPECT_EQ(got[0], XXH3_64bits(data.data(), bytes));
  EXPECT_EQ(got[1], XXH3_64bits(data.data() + 100, 4097));
  (void)gpu::DeviceFree(*out);
  (void)gpu::HostUnregister(host);
  std::free(host);
}

// Engine blocks hashed in place equal the CPU hash of the payload the reference gathers.
TEST(GpuChecksumTest, CacheBlocksOfEveryLayoutEqualXxh3OfTheGatheredPayload) {
  KVTIER_REQUIRE_GPU();
  for (kv_test::Layout layout : kv_test::kAllLayouts) {
    SCOPED_TRACE(kv_test::LayoutName(layout));
    kv_test::Shape shape;
    shape.layers = 3;
    shape.num_blocks = 8;
    shape.kv_heads = 4;
    shape.head_dim = 64;
    const auto host_bytes = RandomBytes(shape.cache_bytes(), 4);
    auto dev = gpu::DeviceAlloc(shape.cache_bytes());
    KVTIER_ASSERT_OK(dev);
    auto stream = gpu::Stream::Create();
    KVTIER_ASSERT_OK(stream);
    KVTIER_ASSERT_OK(gpu::CopyAsync(*dev, host_bytes.data(), host_bytes.size(), stream->handle()));
    const PagedKvCache dev_cache = kv_test::MakeCache(layout, shape, *dev);
    std::vector<unsigned char> host_copy = host_bytes;
    const PagedKvCache host_cache = kv_test::MakeCache(layout, shape, host_copy.data());
    const std::vector<int32_t> blocks = {5, 0, 7, 2};
    auto out = gpu::DeviceAlloc(blocks.size() * sizeof(uint64_t));
    KVTIER_ASSERT_OK(out);
    auto checksummer = GpuChecksummer::Create();
    KVTIER_ASSERT_OK(checksummer);
    KVTIER_ASSERT_OK(
        (*checksummer)
            ->CacheBlocks(dev_cache, blocks, static_cast<uint64_t*>(*out), stream->handle()));
    std::vector<uint64_t> got(blocks.size());
    KVTIER_ASSERT_OK(gpu::CopyAsync(got.data(), *out, got.size() * 8, stream->handle()));
    KVTIER_ASSERT_OK(stream->Synchronize());
    const size_t payload = host_cache.payload_bytes();
    std::vector<std::vector<unsigned char>> payloads(blocks.size(),
                                                     std::vector<unsigned char>(payload));
    std::vector<void*> ptrs;
    for (auto& p : payloads) ptrs.push_back(p.data());
    KVTIER_ASSERT_OK(CopyKvReference(host_cache, KvCopyDirection::kCacheToPayload, blocks, ptrs));
    for (size_t i = 0; i < blocks.size(); ++i) {
      EXPECT_EQ(got[i], XXH3_64bits(payloads[i].data(), payload)) << "engine block " << blocks[i];
    }
    (void)gpu::DeviceFree(*dev);
    (void)gpu::DeviceFree(*out);
  }
}

TEST(GpuChecksumTest, BadArgumentsAreRefusedWithTheirName) {
  KVTIER_REQUIRE_GPU();
  auto checksummer = GpuChecksummer::Create();
  KVTIER_ASSERT_OK(checksummer);
  const void* ptrs[] = {nullptr};
  const uint32_t lens[] = {16, 32};
  const absl::Status mismatch =
      (*checksummer)->Payloads(ptrs, std::span(lens, 2), nullptr, nullptr);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  const absl::Status null = (*checksummer)->Payloads(ptrs, std::span(lens, 1), nullptr, nullptr);
  EXPECT_NE(std::string(null.message()).find("payloads[0]"), std::string::npos) << null;
}

TEST(GpuChecksumTest, TheCpuVariantSaysItHasNoBackend) {
  if (gpu::UnavailableReason().empty()) GTEST_SKIP() << "this build has a usable GPU";
  auto checksummer = GpuChecksummer::Create();
  EXPECT_FALSE(checksummer.ok());
}

}  // namespace
}  // namespace kvtier
