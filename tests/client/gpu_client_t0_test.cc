// GPU gets through T0 against a real kvtierd with a GPU tier (client/gpu_client.h "T0"): the
// client maps the daemon's T0 by IPC, kAlways has the daemon promote blocks into T0 and copies them
// device-to-device, kWhenPresent then finds them there (Lookup says T0) and reads them from T0,
// and a get that mixes T0 and T1 blocks lands every byte where the CPU reference says. The last
// test needs no GPU: a daemon without T0 says so in its Welcome and refuses nothing else.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "client/gpu_client.h"
#include "kernels/kv_copy.h"
#include "tests/daemon/kvtierd_test_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/support/pattern.h"

namespace kvtier {
namespace {

using client::T0Reads;
using protocol::BlockCode;
using testing::KvtierdProcess;

// 4 layers x 2 x 16 tokens x 2 heads x 64 dims x 2 bytes = 32 KiB payloads in 64 KiB slots.
constexpr uint32_t kLayers = 4, kBlockTokens = 16, kHeads = 2, kHeadDim = 64, kElem = 2;
constexpr uint32_t kEngineBlocks = 48;
constexpr uint32_t kBlocks = 12;  // per round

const std::vector<std::string> kT1Flags = {
    "--t1.capacity_bytes", "64MiB", "--t1.slot_bytes", "64KiB",
    "--t1.huge_pages",     "off",   "--t2.enabled",    "false"};

// An engine cache in device memory (vLLM layout) with a host mirror for the CPU reference.
struct EngineCache {
  std::vector<void*> device_layers;
  std::vector<std::vector<std::byte>> host_layers;
  size_t layer_bytes = uint64_t{2} * kEngineBlocks * kBlockTokens * kHeads * kHeadDim * kElem;

  static PagedKvCache Describe(const std::vector<void*>& bases) {
    return VllmLayout(bases, kEngineBlocks, kBlockTokens, kHeads, kHeadDim, kElem);
  }
  PagedKvCache Device() const { return Describe(device_layers); }
  PagedKvCache Host() {
    std::vector<void*> bases;
    for (auto& h : host_layers) bases.push_back(h.data());
    return Describe(bases);
  }
};

class GpuClientT0Test : public ::testing::TestWithParam<KvCopyPath> {
 protected:
  void SetUp() override {
    KVTIER_REQUIRE_GPU();
    std::vector<std::string> flags = kT1Flags;
    for (const char* f : {"--t0.enabled", "true", "--t0.capacity_bytes", "64MiB"}) {
      flags.push_back(f);
    }
    auto d = KvtierdProcess::Start(dir_.path(), flags);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    Namespace ns = testing::ItNamespace();
    ns.block_tokens = kBlockTokens;
    auto c = testing::ConnectTo(*daemon_, ns, "gpu-t0-test");
    ASSERT_TRUE(c.ok()) << c.status() << "\n" << daemon_->Log();
    client_ = std::move(*c);
    ASSERT_TRUE(client_->t0().has_value()) << "the Welcome has no T0\n" << daemon_->Log();
    EXPECT_EQ(client_->t0()->slot_bytes, client_->slot_bytes());  // t0 slots = t1.slot_bytes
    // The Welcome names T0's GPU (t0.device 0) by the bus id its DeviceTier read at start.
    auto info = gpu::GetDeviceInfo(0);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(client_->t0()->pci_bus_id, info->pci_bus_id);
    client::GpuClientOptions opts;
    opts.path = GetParam();
    auto g = client::GpuClient::Create(client_.get(), opts);
    ASSERT_TRUE(g.ok()) << g.status();
    gpu_ = std::move(*g);
    ASSERT_TRUE(gpu_->t0_mapped()) << "T0 is on " << client_->t0()->pci_bus_id;
    auto s = gpu::Stream::Create();
    ASSERT_TRUE(s.ok()) << s.status();
    stream_ = std::move(*s);
    for (EngineCache* cache : {&src_, &dst_}) {
      for (uint32_t l = 0; l < kLayers; ++l) {
        auto p = gpu::DeviceAlloc(cache->layer_bytes);
        ASSERT_TRUE(p.ok()) << p.status();
        cache->device_layers.push_back(*p);
        cache->host_layers.emplace_back(cache->layer_bytes);
      }
    }
  }

  void TearDown() override {
    gpu_.reset();
    client_.reset();
    for (EngineCache* c : {&src_, &dst_}) {
      for (void* p : c->device_layers) (void)gpu::DeviceFree(p);
    }
    if (daemon_ != nullptr) daemon_->Stop(SIGTERM);
  }

  // Puts round `round`'s blocks from scattered source engine blocks (through T1, as engines do),
  // overwrites the source at once, and returns the payloads the blocks must hold.
  std::vector<std::vector<std::byte>> PutRound(uint32_t round, std::vector<BlockKey>* keys) {
    std::vector<int32_t> from(kBlocks);
    for (uint32_t i = 0; i < kBlocks; ++i) {
      from[i] = static_cast<int32_t>((i * 7 + round * 5) % kEngineBlocks);
    }
    std::vector<uint32_t> tokens(kBlocks * kBlockTokens);
    std::iota(tokens.begin(), tokens.end(), round * 100000u);
    *keys = client_->KeysFor(tokens).value();
    FillSource(round + 1);
    std::vector<std::vector<std::byte>> want(kBlocks, std::vector<std::byte>(Payload()));
    auto put = gpu_->PutFromCache(*keys, src_.Device(), from, stream_.handle());
    EXPECT_TRUE(put.ok()) << put.status();
    if (!put.ok()) return want;
    auto codes = put->Wait();
    EXPECT_TRUE(codes.ok()) << codes.status();
    for (BlockCode c : codes.value_or(std::vector<BlockCode>{})) EXPECT_EQ(c, BlockCode::kOk);
    std::vector<void*> ptrs;
    for (auto& w : want) ptrs.push_back(w.data());
    EXPECT_TRUE(CopyKvReference(src_.Host(), KvCopyDirection::kCacheToPayload, from, ptrs).ok());
    FillSource(round + 1000);
    return want;
  }

  // Gets keys into scattered destination blocks with `mode`, reads the destination right after
  // on the same stream, and compares every byte with the reference. Returns the T0 blocks read.
  size_t GetAndCompare(T0Reads mode, const std::vector<BlockKey>& keys,
                       std::vector<std::vector<std::byte>>& want, uint32_t salt) {
    std::vector<int32_t> to(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      to[i] = static_cast<int32_t>((i * 11 + salt * 3 + 1) % kEngineBlocks);
    }
    ZeroDestination();
    gpu_->set_t0_reads(mode);
    auto get = gpu_->GetIntoCache(keys, dst_.Device(), to, stream_.handle());
    EXPECT_TRUE(get.ok()) << get.status();
    if (!get.ok()) return 0;
    EXPECT_EQ(get->copied_blocks(), keys.size());
    std::vector<std::vector<std::byte>> got(kLayers, std::vector<std::byte>(dst_.layer_bytes));
    for (uint32_t l = 0; l < kLayers; ++l) {
      EXPECT_TRUE(
          gpu::CopyAsync(got[l].data(), dst_.device_layers[l], dst_.layer_bytes, stream_.handle())
              .ok());
    }
    const size_t from_t0 = get->t0_blocks();
    auto codes = get->Wait();
    EXPECT_TRUE(codes.ok()) << codes.status();
    EXPECT_TRUE(stream_.Synchronize().ok());
    std::vector<void*> ptrs;
    for (size_t i = 0; i < keys.size(); ++i) ptrs.push_back(want[i].data());
    EXPECT_TRUE(CopyKvReference(dst_.Host(), KvCopyDirection::kPayloadToCache, to, ptrs).ok());
    for (uint32_t l = 0; l < kLayers; ++l) {
      EXPECT_EQ(std::memcmp(got[l].data(), dst_.host_layers[l].data(), dst_.layer_bytes), 0)
          << "layer " << l << ", salt " << salt;
    }
    return from_t0;
  }

  // How many of keys Lookup finds in T0.
  size_t InT0(const std::vector<BlockKey>& keys) {
    auto where = client_->Lookup(keys);
    EXPECT_TRUE(where.ok()) << where.status();
    if (!where.ok()) return 0;
    EXPECT_EQ(where->hit_blocks, keys.size());
    size_t n = 0;
    for (TierMask m : where->tiers) n += (m & TierBit(Tier::kT0)) != 0 ? 1 : 0;
    return n;
  }

  uint64_t Payload() const { return src_.Device().payload_bytes(); }

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

TEST_P(GpuClientT0Test, AlwaysPromotesIntoT0AndWhenPresentThenReadsTheSameBytesFromT0) {
  for (uint32_t round = 0; round < 10; ++round) {
    std::vector<BlockKey> keys;
    std::vector<std::vector<std::byte>> want = PutRound(round, &keys);
    ASSERT_FALSE(::testing::Test::HasFailure()) << daemon_->Log();
    EXPECT_EQ(InT0(keys), 0u) << "a put lands in T1 only";
    EXPECT_EQ(GetAndCompare(T0Reads::kAlways, keys, want, round), kBlocks) << "round " << round;
    EXPECT_EQ(InT0(keys), kBlocks) << "kAlways promoted every block into T0";
    EXPECT_EQ(GetAndCompare(T0Reads::kWhenPresent, keys, want, round + 7), kBlocks);
    EXPECT_EQ(GetAndCompare(T0Reads::kNever, keys, want, round + 13), 0u);
    ASSERT_FALSE(::testing::Test::HasFailure()) << "round " << round << "\n" << daemon_->Log();
  }
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->leases_held, 0u);
}

TEST_P(GpuClientT0Test, WhenPresentMixesT0AndT1BlocksInOneTransfer) {
  std::vector<BlockKey> keys;
  std::vector<std::vector<std::byte>> want = PutRound(0, &keys);
  ASSERT_FALSE(::testing::Test::HasFailure()) << daemon_->Log();
  // Every other block into T0: the get below interleaves the two tiers.
  std::vector<BlockKey> odd;
  std::vector<std::vector<std::byte>> odd_want;
  for (size_t i = 1; i < keys.size(); i += 2) {
    odd.push_back(keys[i]);
    odd_want.push_back(want[i]);
  }
  EXPECT_EQ(GetAndCompare(T0Reads::kAlways, odd, odd_want, 1), odd.size());
  EXPECT_EQ(InT0(keys), odd.size());
  EXPECT_EQ(GetAndCompare(T0Reads::kWhenPresent, keys, want, 2), odd.size());
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->leases_held, 0u);
}

INSTANTIATE_TEST_SUITE_P(Paths, GpuClientT0Test,
                         ::testing::Values(KvCopyPath::kDma, KvCopyPath::kKernel),
                         [](const auto& p) { return std::string(KvCopyPathName(p.param)); });

// No GPU needed: a daemon without T0 sends an all-zero T0 section, and a tier-0 get is refused
// on the client side with a reason.
TEST(GpuClientT0Cpu, WithoutT0TheClientSaysSoAndRefusesTier0Gets) {
  testing::TempDir dir;
  auto d = KvtierdProcess::Start(dir.path(), kT1Flags);
  ASSERT_TRUE(d.ok()) << d.status();
  auto c = testing::ConnectTo(**d, testing::ItNamespace(), "no-t0");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE((*c)->t0().has_value());
  const std::vector<uint32_t> tokens(16, 7);
  const std::vector<BlockKey> keys = (*c)->KeysFor(tokens).value();
  auto got = (*c)->Get(keys, Tier::kT0);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*c)->Get(keys, Tier::kT2).status().code(), absl::StatusCode::kInvalidArgument);
  auto t1 = (*c)->Get(keys, Tier::kT1);
  ASSERT_TRUE(t1.ok()) << t1.status();
  for (const auto& r : *t1) EXPECT_EQ(r.code, uint32_t(BlockCode::kMissing));
  c->reset();
  EXPECT_EQ((*d)->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace kvtier
