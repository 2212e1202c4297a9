// GPU gets and puts against a real kvtierd (client/gpu_client.h). The ordering test is the one the
// issue asks for: overwrite the engine's source blocks right after a put completes, read the
// destination right after a get completes, many times, and compare every byte with the CPU
// reference. A missing synchronisation anywhere shows up as a mismatch.
#include "client/gpu_client.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/kv_copy.h"
#include "tests/daemon/kvtierd_test_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/support/pattern.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using testing::KvtierdProcess;

// Small Llama-like blocks: 4 layers x 2 x 16 tokens x 2 heads x 64 dims x 2 bytes = 32 KiB
// payloads.
constexpr uint32_t kLayers = 4, kBlockTokens = 16, kHeads = 2, kHeadDim = 64, kElem = 2;
constexpr uint32_t kEngineBlocks = 48;
constexpr uint32_t kBlocksPerPut = 12;

enum class Layout { kVllm, kFlashInferHnd };

// One engine cache: device memory per layer, plus the same shape over host buffers for the CPU
// reference.
struct EngineCache {
  Layout layout;
  std::vector<void*> device_layers;
  std::vector<std::vector<std::byte>> host_layers;
  size_t layer_bytes = uint64_t{2} * kEngineBlocks * kBlockTokens * kHeads * kHeadDim * kElem;

  PagedKvCache Describe(const std::vector<void*>& bases) const {
    if (layout == Layout::kVllm) {
      return VllmLayout(bases, kEngineBlocks, kBlockTokens, kHeads, kHeadDim, kElem);
    }
    return FlashInferHndLayout(bases, kBlockTokens, kHeads, kHeadDim, kElem);
  }
  PagedKvCache Device() const { return Describe(device_layers); }
  PagedKvCache Host() {
    std::vector<void*> bases;
    for (auto& h : host_layers) bases.push_back(h.data());
    return Describe(bases);
  }
};

class GpuClientTest : public ::testing::TestWithParam<std::tuple<Layout, KvCopyPath>> {
 protected:
  void SetUp() override {
    KVTIER_REQUIRE_GPU();
    auto d = KvtierdProcess::Start(
        dir_.path(), {"--t1.capacity_bytes", "64MiB", "--t1.slot_bytes", "64KiB", "--t1.huge_pages",
                      "off", "--t2.enabled", "false"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    Namespace ns = testing::ItNamespace();
    ns.block_tokens = kBlockTokens;  // one kvtier block per engine block
    auto c = testing::ConnectTo(*daemon_, ns, "gpu-test");
    ASSERT_TRUE(c.ok()) << c.status() << "\n" << daemon_->Log();
    client_ = std::move(*c);
    client::GpuClientOptions opts;
    opts.path = std::get<1>(GetParam());
    auto g = client::GpuClient::Create(client_.get(), opts);
    ASSERT_TRUE(g.ok()) << g.status();
    gpu_ = std::move(*g);
    auto s = gpu::Stream::Create();
    ASSERT_TRUE(s.ok()) << s.status();
    stream_ = std::move(*s);
    Alloc(src_);
    Alloc(dst_);
  }

  void TearDown() override {
    gpu_.reset();
    client_.reset();
    for (EngineCache* c : {&src_, &dst_}) {
      for (void* p : c->device_layers) (void)gpu::DeviceFree(p);
    }
    if (daemon_ != nullptr) daemon_->Stop(SIGTERM);
  }

  void Alloc(EngineCache& c) {
    c.layout = std::get<0>(GetParam());
    for (uint32_t l = 0; l < kLayers; ++l) {
      auto p = gpu::DeviceAlloc(c.layer_bytes);
      ASSERT_TRUE(p.ok()) << p.status();
      c.device_layers.push_back(*p);
      c.host_layers.emplace_back(c.layer_bytes);
    }
  }

  // Fills the source cache with round `seed`'s pattern on the stream, and its host mirror.
  void FillSource(uint64_t seed) {
    for (uint32_t l = 0; l < kLayers; ++l) {
      ASSERT_TRUE(
          FillPattern(src_.device_layers[l], src_.layer_bytes, seed * 131 + l, stream_.handle())
              .ok());
      FillPatternReference(src_.host_layers[l].data(), src_.layer_bytes, seed * 131 + l);
    }
  }

  void ZeroDestination() {
    for (uint32_t l = 0; l < kLayers; ++l) {
      ASSERT_TRUE(
          gpu::MemsetAsync(dst_.device_layers[l], 0, dst_.layer_bytes, stream_.handle()).ok());
      std::memset(dst_.host_layers[l].data(), 0, dst_.layer_bytes);
    }
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::GpuClient> gpu_;
  gpu::Stream stream_;
  EngineCache src_, dst_;
};

TEST_P(GpuClientTest, OverwriteAfterPutAndReadAfterGetSeeExactlyTheStoredBlocks) {
  const PagedKvCache src_dev = src_.Device(), dst_dev = dst_.Device();
  const PagedKvCache src_host = src_.Host(), dst_host = dst_.Host();
  const uint64_t payload = src_dev.payload_bytes();
  for (uint32_t round = 0; round < 40; ++round) {
    // Engine blocks: a different scattered choice each round, for source and destination.
    std::vector<int32_t> from(kBlocksPerPut), to(kBlocksPerPut);
    for (uint32_t i = 0; i < kBlocksPerPut; ++i) {
      from[i] = static_cast<int32_t>((i * 7 + round * 5) % kEngineBlocks);
      to[i] = static_cast<int32_t>((i * 11 + round * 3 + 1) % kEngineBlocks);
    }
    std::vector<uint32_t> tokens(kBlocksPerPut * kBlockTokens);
    std::iota(tokens.begin(), tokens.end(), round * 100000u);
    const std::vector<BlockKey> keys = client_->KeysFor(tokens).value();

    FillSource(round + 1);
    auto put = gpu_->PutFromCache(keys, src_dev, from, stream_.handle());
    ASSERT_TRUE(put.ok()) << put.status();
    auto put_codes = put->Wait();
    ASSERT_TRUE(put_codes.ok()) << put_codes.status();
    for (BlockCode c : *put_codes) ASSERT_EQ(c, BlockCode::kOk) << "round " << round;

    // The reference payloads come from the host mirror of what the source held at the put.
    std::vector<std::vector<std::byte>> want(kBlocksPerPut, std::vector<std::byte>(payload));
    std::vector<void*> want_ptrs;
    for (auto& w : want) want_ptrs.push_back(w.data());
    ASSERT_TRUE(CopyKvReference(src_host, KvCopyDirection::kCacheToPayload, from, want_ptrs).ok());

    FillSource(round + 1000);  // overwrite at once: the put must have read its blocks already
    ZeroDestination();
    auto get = gpu_->GetIntoCache(keys, dst_dev, to, stream_.handle());
    ASSERT_TRUE(get.ok()) << get.status();
    ASSERT_EQ(get->copied_blocks(), kBlocksPerPut);
    // Read the destination right after, on the same stream, before waiting for anything.
    std::vector<std::vector<std::byte>> got(kLayers, std::vector<std::byte>(dst_.layer_bytes));
    for (uint32_t l = 0; l < kLayers; ++l) {
      ASSERT_TRUE(
          gpu::CopyAsync(got[l].data(), dst_.device_layers[l], dst_.layer_bytes, stream_.handle())
              .ok());
    }
    auto get_codes = get->Wait();
    ASSERT_TRUE(get_codes.ok()) << get_codes.status();
    ASSERT_TRUE(stream_.Synchronize().ok());
    ASSERT_TRUE(CopyKvReference(dst_host, KvCopyDirection::kPayloadToCache, to, want_ptrs).ok());
    for (uint32_t l = 0; l < kLayers; ++l) {
      ASSERT_EQ(std::memcmp(got[l].data(), dst_.host_layers[l].data(), dst_.layer_bytes), 0)
          << "round " << round << ", layer " << l;
    }
  }
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->leases_held, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, GpuClientTest,
    ::testing::Values(std::make_tuple(Layout::kVllm, KvCopyPath::kDma),
                      std::make_tuple(Layout::kVllm, KvCopyPath::kKernel),
                      std::make_tuple(Layout::kFlashInferHnd, KvCopyPath::kKernel)),
    [](const auto& p) {
      return std::string(std::get<0>(p.param) == Layout::kVllm ? "Vllm" : "FlashInferHnd") +
             KvCopyPathName(std::get<1>(p.param));
    });

TEST(GpuClientCpu, CreateSaysWhyWithoutAGpu) {
  if (gpu::UnavailableReason().empty()) GTEST_SKIP() << "a GPU is here: the tests above cover it";
  auto g = client::GpuClient::Create(nullptr, {});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().code(), absl::StatusCode::kOk);
}

}  // namespace
}  // namespace kvtier
