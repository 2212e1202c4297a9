// KvCopier (kernels/kv_copy.h) on a GPU, against CopyKvReference on a host copy of the same cache:
// every layout, both paths (DMA only where pieces are contiguous), payloads in device memory and
// in mapped pinned host memory (as T0 and T1 hold them), gathers and scatters; stream ordering
// over many rounds; descriptor reuse with many copies in flight. In the CPU variant Create says
// there is no backend, and the GPU tests skip with the reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kv_copy.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/kv_test_util.h"
#include "tests/kernels/support/pattern.h"

namespace kvtier {
namespace {

using kv_test::Layout;

// Device memory, freed on scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  ~DeviceBuffer() { (void)gpu::DeviceFree(p); }
};

// Registered (mapped) host memory and its device-side address, as T1 holds slots.
struct MappedHostBuffer {
  void* host = nullptr;
  void* device = nullptr;
  ~MappedHostBuffer() {
    if (device != nullptr) (void)gpu::HostUnregister(host);
    std::free(host);
  }
};

absl::Status AllocMapped(size_t bytes, MappedHostBuffer& b) {
  b.host = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (b.host == nullptr) return absl::ResourceExhaustedError("aligned_alloc");
  KVTIER_RETURN_IF_ERROR(gpu::HostRegister(b.host, (bytes + 4095) / 4096 * 4096));
  auto d = gpu::DevicePointerOf(b.host);
  if (!d.ok()) {
    (void)gpu::HostUnregister(b.host);
    return d.status();
  }
  b.device = *d;
  return absl::OkStatus();
}

enum class PayloadMemory { kDevice, kMappedHost };
const char* MemoryName(PayloadMemory m) {
  return m == PayloadMemory::kDevice ? "device payloads" : "mapped host payloads";
}

// One test case: layout, shape, where payloads live, which path, which engine blocks.
struct Case {
  Layout layout;
  kv_test::Shape shape;
  PayloadMemory memory;
  KvCopyPath path;
  std::vector<int32_t> blocks;
  size_t payload_misalign = 0;  // bytes added to every payload address
  std::string Name() const {
    return fmt::format("{} {} path, {}, {} heads x {} dims x {} bytes, payload offset {}",
                       kv_test::LayoutName(layout), KvCopyPathName(path), MemoryName(memory),
                       shape.kv_heads, shape.head_dim, shape.elem_bytes, payload_misalign);
  }
};

absl::Status AllocDevice(size_t bytes, DeviceBuffer& b) {
  KVTIER_ASSIGN_OR_RETURN(b.p, gpu::DeviceAlloc(bytes));
  return absl::OkStatus();
}

// Payloads for `n` blocks one after another, `misalign` bytes into device or mapped host memory.
struct PayloadArea {
  DeviceBuffer dev;
  MappedHostBuffer host;
  char* base = nullptr;  // device-side address of the area
  size_t bytes = 0;
  std::vector<void*> payloads;  // what the copier is given
};

absl::Status MakePayloads(PayloadMemory memory, size_t n, uint64_t payload_bytes, size_t misalign,
                          PayloadArea& a) {
  a.bytes = n * payload_bytes + misalign;
  if (memory == PayloadMemory::kDevice) {
    KVTIER_RETURN_IF_ERROR(AllocDevice(a.bytes, a.dev));
    a.base = static_cast<char*>(a.dev.p);
  } else {
    KVTIER_RETURN_IF_ERROR(AllocMapped(a.bytes, a.host));
    a.base = static_cast<char*>(a.host.device);
  }
  for (size_t i = 0; i < n; ++i) a.payloads.push_back(a.base + misalign + i * payload_bytes);
  return absl::OkStatus();
}

std::string DescribePayloadDiff(const PagedKvCache& cache, uint64_t diff, size_t misalign) {
  if (diff < misalign) return fmt::format("byte {} of the padding before payload 0", diff);
  return kv_test::DescribePayloadOffset(cache, diff - misalign);
}

// Gathers c.blocks from a patterned device cache into payloads and compares them with the
// reference on a host copy of that cache; then scatters those payloads into a zeroed cache and
// compares the whole cache (bytes of other blocks must stay zero).
void RunGatherScatter(KvCopier& copier, const Case& c, const gpu::Stream& stream) {
  SCOPED_TRACE(c.Name());
  const kv_test::Shape& s = c.shape;
  const size_t cache_bytes = s.cache_bytes();
  DeviceBuffer src_dev, dst_dev;
  KVTIER_ASSERT_OK(AllocDevice(cache_bytes, src_dev));
  KVTIER_ASSERT_OK(AllocDevice(cache_bytes, dst_dev));
  const PagedKvCache src = kv_test::MakeCache(c.layout, s, src_dev.p);
  const PagedKvCache dst = kv_test::MakeCache(c.layout, s, dst_dev.p);
  PayloadArea area;
  KVTIER_ASSERT_OK(
      MakePayloads(c.memory, c.blocks.size(), src.payload_bytes(), c.payload_misalign, area));
  std::vector<unsigned char> src_host(cache_bytes), got(area.bytes);
  KVTIER_ASSERT_OK(FillPattern(src_dev.p, cache_bytes, 1000 + s.kv_heads, stream.handle()));
  KVTIER_ASSERT_OK(gpu::MemsetAsync(dst_dev.p, 0, cache_bytes, stream.handle()));
  KVTIER_ASSERT_OK(gpu::MemsetAsync(area.base, 0xcd, area.bytes, stream.handle()));
  KVTIER_ASSERT_OK(gpu::CopyAsync(src_host.data(), src_dev.p, cache_bytes, stream.handle()));
  KVTIER_ASSERT_OK(copier.Copy(src, KvCopyDirection::kCacheToPayload, c.blocks, area.payloads,
                               c.path, stream.handle()));
  KVTIER_ASSERT_OK(gpu::CopyAsync(got.data(), area.base, area.bytes, stream.handle()));
  KVTIER_ASSERT_OK(stream.Synchronize());

  std::vector<unsigned char> want(area.bytes, 0xcd);
  std::vector<void*> want_payloads;
  for (void* p : area.payloads)
    want_payloads.push_back(want.data() + (static_cast<char*>(p) - area.base));
  const PagedKvCache src_ref = kv_test::MakeCache(c.layout, s, src_host.data());
  KVTIER_ASSERT_OK(
      CopyKvReference(src_ref, KvCopyDirection::kCacheToPayload, c.blocks, want_payloads));
  uint64_t diff = kv_test::FirstDifference(want.data(), got.data(), area.bytes);
  ASSERT_EQ(diff, area.bytes) << "gather differs at "
                              << DescribePayloadDiff(src, diff, c.payload_misalign) << ": want "
                              << int{want[diff]} << ", got " << int{got[diff]};

  KVTIER_ASSERT_OK(copier.Copy(dst, KvCopyDirection::kPayloadToCache, c.blocks, area.payloads,
                               c.path, stream.handle()));
  std::vector<unsigned char> cache_got(cache_bytes), cache_want(cache_bytes, 0);
  KVTIER_ASSERT_OK(gpu::CopyAsync(cache_got.data(), dst_dev.p, cache_bytes, stream.handle()));
  KVTIER_ASSERT_OK(stream.Synchronize());
  const PagedKvCache dst_ref = kv_test::MakeCache(c.layout, s, cache_want.data());
  KVTIER_ASSERT_OK(
      CopyKvReference(dst_ref, KvCopyDirection::kPayloadToCache, c.blocks, want_payloads));
  diff = kv_test::FirstDifference(cache_want.data(), cache_got.data(), cache_bytes);
  ASSERT_EQ(diff, cache_bytes) << "scatter differs at "
                               << kv_test::DescribeCacheOffset(dst_ref, s, cache_want.data(), diff)
                               << ": want " << int{cache_want[diff]} << ", got "
                               << int{cache_got[diff]};
}

// Per layout: a shape with several heads (HND's rows are then strided), head_dim 64 or 128.
kv_test::Shape ShapeFor(Layout layout) {
  kv_test::Shape s;  // 4 layers, 32 engine blocks of 16 tokens, bf16
  switch (layout) {
    case Layout::kVllm:
      s.kv_heads = 8, s.head_dim = 128;
      break;
    case Layout::kFlashInferNhd:
      s.kv_heads = 2, s.head_dim = 64;
      break;
    case Layout::kFlashInferHnd:
      s.kv_heads = 4, s.head_dim = 128;
      break;
    case Layout::kSglang:
      s.kv_heads = 8, s.head_dim = 64;
      break;
  }
  return s;
}

struct GpuFixture {
  std::unique_ptr<KvCopier> copier;
  gpu::Stream stream;
};

absl::Status SetUpGpu(GpuFixture& f) {
  KVTIER_RETURN_IF_ERROR(gpu::SetDevice(0));
  KVTIER_ASSIGN_OR_RETURN(f.copier, KvCopier::Create());
  KVTIER_ASSIGN_OR_RETURN(f.stream, gpu::Stream::Create());
  return absl::OkStatus();
}

class KvCopyGpuLayouts : public testing::TestWithParam<Layout> {};

TEST_P(KvCopyGpuLayouts, GatherAndScatterEqualTheReferenceOnEveryPathAndPayloadMemory) {
  KVTIER_REQUIRE_GPU();
  GpuFixture f;
  KVTIER_ASSERT_OK(SetUpGpu(f));
  const kv_test::Shape s = ShapeFor(GetParam());
  // kv_layout.h: only HND with several heads has strided rows (pinned by kvtier_kv_layout_test).
  const bool contiguous = GetParam() != Layout::kFlashInferHnd || s.kv_heads == 1;
  for (PayloadMemory memory : {PayloadMemory::kDevice, PayloadMemory::kMappedHost}) {
    for (KvCopyPath path : {KvCopyPath::kKernel, KvCopyPath::kDma}) {
      if (path == KvCopyPath::kDma && !contiguous) continue;
      const Case c{GetParam(), s, memory, path, kv_test::ShuffledBlocks(s.num_blocks, 8, 7)};
      RunGatherScatter(*f.copier, c, f.stream);
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, KvCopyGpuLayouts, testing::ValuesIn(kv_test::kAllLayouts),
                         [](const testing::TestParamInfo<Layout>& p) {
                           return std::string(kv_test::LayoutName(p.param));
                         });

TEST(KvCopyGpu, OddRowSizesAndMisalignedPayloadsFallBackToNarrowerUnits) {
  KVTIER_REQUIRE_GPU();
  GpuFixture f;
  KVTIER_ASSERT_OK(SetUpGpu(f));
  kv_test::Shape s;
  s.layers = 3, s.num_blocks = 12, s.block_tokens = 8, s.kv_heads = 3, s.head_dim = 37;  // 74 B
  for (Layout layout : {Layout::kVllm, Layout::kFlashInferHnd}) {
    for (size_t misalign : {size_t{0}, size_t{2}, size_t{8}}) {
      for (PayloadMemory memory : {PayloadMemory::kDevice, PayloadMemory::kMappedHost}) {
        Case c{layout, s, memory, KvCopyPath::kKernel, {11, 0, 5, 6}, misalign};
        RunGatherScatter(*f.copier, c, f.stream);
        if (HasFatalFailure()) return;
      }
    }
  }
  s.head_dim = 64, s.elem_bytes = 1;  // fp8, 16-byte rows: full width again
  RunGatherScatter(
      *f.copier,
      {Layout::kFlashInferNhd, s, PayloadMemory::kDevice, KvCopyPath::kKernel, {3, 4, 5, 9}, 4},
      f.stream);
}

// A host copy of `cache_bytes` of pattern `seed`, gathered by the reference for `blocks`.
std::vector<unsigned char> ReferenceGather(Layout layout, const kv_test::Shape& s, uint64_t seed,
                                           const std::vector<int32_t>& blocks) {
  std::vector<unsigned char> cache(s.cache_bytes());
  FillPatternReference(cache.data(), cache.size(), seed);
  const PagedKvCache ref = kv_test::MakeCache(layout, s, cache.data());
  std::vector<unsigned char> out(blocks.size() * ref.payload_bytes());
  std::vector<void*> payloads;
  for (size_t i = 0; i < blocks.size(); ++i)
    payloads.push_back(out.data() + i * ref.payload_bytes());
  EXPECT_TRUE(CopyKvReference(ref, KvCopyDirection::kCacheToPayload, blocks, payloads).ok());
  return out;
}

// Each round refills the source on the stream, copies on the same stream and waits on an event
// only: a copy that ran before the fill, or an event that fired before the copy, shows as the
// previous round's bytes. Odd rounds also scatter payloads the host has just written.
TEST(KvCopyGpu, FiftyRoundsOnOneStreamEachSeeTheirOwnRoundsData) {
  KVTIER_REQUIRE_GPU();
  GpuFixture f;
  KVTIER_ASSERT_OK(SetUpGpu(f));
  const kv_test::Shape s;  // vLLM, 4 layers, 32 blocks of 16 tokens, 8 heads x 128, bf16
  DeviceBuffer src_dev, dst_dev;
  KVTIER_ASSERT_OK(AllocDevice(s.cache_bytes(), src_dev));
  KVTIER_ASSERT_OK(AllocDevice(s.cache_bytes(), dst_dev));
  const PagedKvCache src = kv_test::MakeCache(Layout::kVllm, s, src_dev.p);
  const PagedKvCache dst = kv_test::MakeCache(Layout::kVllm, s, dst_dev.p);
  PayloadArea area;
  KVTIER_ASSERT_OK(MakePayloads(PayloadMemory::kMappedHost, 8, src.payload_bytes(), 0, area));
  auto* host_payloads = static_cast<unsigned char*>(area.host.host);
  auto done = gpu::Event::Create();
  KVTIER_ASSERT_OK(done);
  std::vector<unsigned char> cache_got(s.cache_bytes());
  for (uint32_t round = 0; round < 50; ++round) {
    SCOPED_TRACE(fmt::format("round {}", round));
    const uint64_t seed = 5000 + round;
    const KvCopyPath path = round % 2 == 0 ? KvCopyPath::kKernel : KvCopyPath::kDma;
    const std::vector<int32_t> blocks = kv_test::ShuffledBlocks(s.num_blocks, 8, round);
    KVTIER_ASSERT_OK(FillPattern(src_dev.p, s.cache_bytes(), seed, f.stream.handle()));
    KVTIER_ASSERT_OK(f.copier->Copy(src, KvCopyDirection::kCacheToPayload, blocks, area.payloads,
                                    path, f.stream.handle()));
    KVTIER_ASSERT_OK(done->Record(f.stream.handle()));
    KVTIER_ASSERT_OK(done->Synchronize());
    const std::vector<unsigned char> want = ReferenceGather(Layout::kVllm, s, seed, blocks);
    const uint64_t diff = kv_test::FirstDifference(want.data(), host_payloads, want.size());
    ASSERT_EQ(diff, want.size()) << KvCopyPathName(path) << " gather differs at "
                                 << kv_test::DescribePayloadOffset(src, diff);
    if (round % 2 == 0) continue;
    // Scatter: the host writes the payloads, then the stream zeroes dst and scatters them.
    FillPatternReference(host_payloads, area.bytes, seed + 1);
    KVTIER_ASSERT_OK(gpu::MemsetAsync(dst_dev.p, 0, s.cache_bytes(), f.stream.handle()));
    KVTIER_ASSERT_OK(f.copier->Copy(dst, KvCopyDirection::kPayloadToCache, blocks, area.payloads,
                                    KvCopyPath::kKernel, f.stream.handle()));
    KVTIER_ASSERT_OK(
        gpu::CopyAsync(cache_got.data(), dst_dev.p, s.cache_bytes(), f.stream.handle()));
    KVTIER_ASSERT_OK(done->Record(f.stream.handle()));
    KVTIER_ASSERT_OK(done->Synchronize());
    std::vector<unsigned char> cache_want(s.cache_bytes(), 0);
    const PagedKvCache ref = kv_test::MakeCache(Layout::kVllm, s, cache_want.data());
    std::vector<void*> host_slots;
    for (size_t i = 0; i < blocks.size(); ++i)
      host_slots.push_back(host_payloads + i * src.payload_bytes());
    KVTIER_ASSERT_OK(CopyKvReference(ref, KvCopyDirection::kPayloadToCache, blocks, host_slots));
    const uint64_t cdiff =
        kv_test::FirstDifference(cache_want.data(), cache_got.data(), s.cache_bytes());
    ASSERT_EQ(cdiff, s.cache_bytes())
        << "scatter differs at " << kv_test::DescribeCacheOffset(ref, s, cache_want.data(), cdiff);
  }
}

// Forty kernel-path copies enqueued behind a long fill, with no wait in between: more launches in
// flight than the descriptor ring holds, so slots are added, and then waited for before reuse. Each
// copy's own blocks must land in its own payloads.
TEST(KvCopyGpu, ManyCopiesInFlightKeepTheirOwnDescriptors) {
  KVTIER_REQUIRE_GPU();
  GpuFixture f;
  KVTIER_ASSERT_OK(SetUpGpu(f));
  kv_test::Shape s;
  s.layers = 2, s.num_blocks = 64, s.kv_heads = 2, s.head_dim = 64;
  constexpr size_t kCopies = 40, kBlocksPerCopy = 4;
  constexpr size_t kStallBytes = size_t{512} << 20;
  DeviceBuffer cache_dev, stall;
  KVTIER_ASSERT_OK(AllocDevice(s.cache_bytes(), cache_dev));
  KVTIER_ASSERT_OK(AllocDevice(kStallBytes, stall));
  const PagedKvCache cache = kv_test::MakeCache(Layout::kFlashInferHnd, s, cache_dev.p);
  PayloadArea area;
  KVTIER_ASSERT_OK(MakePayloads(PayloadMemory::kDevice, kCopies * kBlocksPerCopy,
                                cache.payload_bytes(), 0, area));
  KVTIER_ASSERT_OK(FillPattern(cache_dev.p, s.cache_bytes(), 77, f.stream.handle()));
  for (int i = 0; i < 4; ++i) {
    KVTIER_ASSERT_OK(FillPattern(stall.p, kStallBytes, i, f.stream.handle()));
  }
  std::vector<int32_t> all_blocks;
  for (size_t k = 0; k < kCopies; ++k) {
    const std::vector<int32_t> blocks =
        kv_test::ShuffledBlocks(s.num_blocks, kBlocksPerCopy, static_cast<uint32_t>(100 + k));
    all_blocks.insert(all_blocks.end(), blocks.begin(), blocks.end());
    std::span<void* const> slots(area.payloads.data() + k * kBlocksPerCopy, kBlocksPerCopy);
    KVTIER_ASSERT_OK(f.copier->Copy(cache, KvCopyDirection::kCacheToPayload, blocks, slots,
                                    KvCopyPath::kKernel, f.stream.handle()));
  }
  std::vector<unsigned char> got(area.bytes);
  KVTIER_ASSERT_OK(gpu::CopyAsync(got.data(), area.base, area.bytes, f.stream.handle()));
  KVTIER_ASSERT_OK(f.stream.Synchronize());
  const std::vector<unsigned char> want =
      ReferenceGather(Layout::kFlashInferHnd, s, 77, all_blocks);
  const uint64_t diff = kv_test::FirstDifference(want.data(), got.data(), want.size());
  ASSERT_EQ(diff, want.size()) << "copy " << diff / cache.payload_bytes() / kBlocksPerCopy
                               << " differs at " << kv_test::DescribePayloadOffset(cache, diff);
}

TEST(KvCopyGpu, BadArgumentsAreRefusedBeforeAnythingIsEnqueued) {
  KVTIER_REQUIRE_GPU();
  GpuFixture f;
  KVTIER_ASSERT_OK(SetUpGpu(f));
  kv_test::Shape s;
  s.layers = 1, s.num_blocks = 4;
  std::vector<unsigned char> memory(s.cache_bytes()), payload(s.cache_bytes());
  const PagedKvCache hnd = kv_test::MakeCache(Layout::kFlashInferHnd, s, memory.data());
  const std::vector<int32_t> one = {1}, two = {1, 2}, negative = {-3}, none = {};
  const std::vector<void*> slot = {payload.data()}, no_slots = {};
  auto copy = [&](const PagedKvCache& c, std::span<const int32_t> b, std::span<void* const> p,
                  KvCopyPath path) {
    return f.copier->Copy(c, KvCopyDirection::kPayloadToCache, b, p, path, f.stream.handle())
        .code();
  };
  EXPECT_EQ(copy(hnd, one, slot, KvCopyPath::kDma), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(copy(hnd, two, slot, KvCopyPath::kKernel), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(copy(hnd, negative, slot, KvCopyPath::kKernel), absl::StatusCode::kInvalidArgument);
  PagedKvCache bad = hnd;
  bad.layers[0].v = nullptr;
  EXPECT_EQ(copy(bad, one, slot, KvCopyPath::kKernel), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(copy(hnd, none, no_slots, KvCopyPath::kKernel), absl::StatusCode::kOk);
  KVTIER_ASSERT_OK(f.stream.Synchronize());
}

TEST(KvCopyGpu, CreateInTheCpuVariantSaysThereIsNoBackend) {
  if (std::string(gpu::BackendName()) != "none") GTEST_SKIP() << "GPU variant";
  auto copier = KvCopier::Create();
  ASSERT_FALSE(copier.ok());
  EXPECT_EQ(copier.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kvtier
