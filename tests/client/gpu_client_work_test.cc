// Blocks born in T0 (protocol v3; issue 12 "Blocks born in T0") against a real kvtierd with a GPU
// tier: a client maps T0 (GpuClient), takes T0 working slots or tier-0 put_begin slots, fills
// them on the device (the test pattern kernel, or a copy from a host buffer), hashes them on the
// GPU (GpuChecksummer, which must equal XXH3_64bits of the host reference), and publishes or
// commits them with those checksums. Another client then reads the same bytes from T0 in place
// and through T1 (the daemon copies T0 -> T1), and blocks pushed out of a small T0 reach T2
// (flush_on_stop checks the GPU checksum against the bytes before it writes) and come back with
// the same bytes after a restart. Every test skips, saying why, without a GPU.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "client/gpu_client.h"
#include "kernels/gpu_checksum.h"
#include "tests/daemon/kvtierd_test_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/support/pattern.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;
using protocol::WorkPublishItem;
using testing::KvtierdProcess;

constexpr uint32_t kSlot = 64 << 10;  // t1.slot_bytes, so T0's and T2's slots too
constexpr size_t kMaxBlocks = 64;     // per FillAndHash

// T1 of 1024 slots (never evicts here); T0 of `t0_capacity`; T2 when asked, with flush_on_stop.
std::vector<std::string> Flags(const std::string& t0_capacity, bool t2) {
  return {"--t1.capacity_bytes", "64MiB",     "--t1.slot_bytes",        "64KiB",
          "--t1.huge_pages",     "off",       "--t0.enabled",           "true",
          "--t0.capacity_bytes", t0_capacity, "--t2.enabled",           t2 ? "true" : "false",
          "--t2.capacity_bytes", "64MiB",     "--daemon.flush_on_stop", "true"};
}

std::vector<BlockCode> Codes(const std::vector<BlockResult>& results) {
  std::vector<BlockCode> codes;
  for (const BlockResult& r : results) codes.push_back(static_cast<BlockCode>(r.code));
  return codes;
}

// Block i's payload: 1 to kSlot bytes (odd lengths and a full slot among them) of pattern seed i+1.
uint32_t BytesOf(size_t i) { return kSlot - static_cast<uint32_t>((i * 4099) % kSlot); }
std::vector<std::byte> Reference(size_t i) {
  std::vector<std::byte> out(BytesOf(i));
  FillPatternReference(out.data(), out.size(), i + 1);
  return out;
}

// One client process's view: its connection and its GpuClient (T0 mapped).
struct Side {
  std::unique_ptr<client::Client> client;
  std::unique_ptr<client::GpuClient> gpu;
};

class GpuClientWorkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KVTIER_REQUIRE_GPU();
    auto s = gpu::Stream::Create();
    ASSERT_TRUE(s.ok()) << s.status();
    stream_ = std::move(*s);
    auto c = GpuChecksummer::Create();
    ASSERT_TRUE(c.ok()) << c.status();
    checksummer_ = std::move(*c);
    auto sums = gpu::DeviceAlloc(kMaxBlocks * sizeof(uint64_t));
    ASSERT_TRUE(sums.ok()) << sums.status();
    sums_ = static_cast<uint64_t*>(*sums);
  }

  void TearDown() override {
    sides_.clear();
    if (sums_ != nullptr) (void)gpu::DeviceFree(sums_);
    if (daemon_ != nullptr) {
      const int status = daemon_->Stop(SIGTERM);
      EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
    }
  }

  void StartDaemon(const std::vector<std::string>& flags) {
    auto d = KvtierdProcess::Start(dir_.path(), flags);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // A client with T0 mapped; nullptr (and a failure) otherwise.
  Side* Open(const std::string& name) {
    auto c = testing::ConnectTo(*daemon_, testing::ItNamespace(), name);
    EXPECT_TRUE(c.ok()) << c.status() << "\n" << daemon_->Log();
    if (!c.ok()) return nullptr;
    EXPECT_TRUE((*c)->t0().has_value()) << "the Welcome has no T0\n" << daemon_->Log();
    auto g = client::GpuClient::Create(c->get(), client::GpuClientOptions{});
    EXPECT_TRUE(g.ok()) << g.status();
    if (!g.ok() || !(*g)->t0_mapped()) {
      ADD_FAILURE() << name << ": T0 is not mapped in this process";
      return nullptr;
    }
    sides_.push_back(std::make_unique<Side>(Side{std::move(*c), std::move(*g)}));
    return sides_.back().get();
  }

  // Fills T0 slots[j] with block blocks[j]'s Reference on the device — the pattern kernel for
  // even blocks, a copy from the host reference for odd ones — and hashes them on the GPU; the
  // checksums, each checked against XXH3_64bits of the reference.
  std::vector<uint64_t> FillAndHash(const Side& side, const std::vector<uint32_t>& slots,
                                    const std::vector<size_t>& blocks) {
    std::vector<std::vector<std::byte>> refs;
    std::vector<const void*> ptrs;
    std::vector<uint32_t> bytes;
    for (size_t j = 0; j < slots.size(); ++j) {
      std::byte* dst = side.gpu->T0SlotData(slots[j]);
      EXPECT_NE(dst, nullptr) << "T0 slot " << slots[j];
      if (dst == nullptr) return {};
      refs.push_back(Reference(blocks[j]));
      const absl::Status filled =
          blocks[j] % 2 == 0
              ? FillPattern(dst, refs.back().size(), blocks[j] + 1, stream_.handle())
              : gpu::CopyAsync(dst, refs.back().data(), refs.back().size(), stream_.handle());
      EXPECT_TRUE(filled.ok()) << filled;
      ptrs.push_back(dst);
      bytes.push_back(static_cast<uint32_t>(refs.back().size()));
    }
    std::vector<uint64_t> sums(slots.size());
    EXPECT_LE(sums.size(), kMaxBlocks);
    EXPECT_TRUE(checksummer_->Payloads(ptrs, bytes, sums_, stream_.handle()).ok());
    EXPECT_TRUE(gpu::CopyAsync(sums.data(), sums_, sums.size() * 8, stream_.handle()).ok());
    EXPECT_TRUE(stream_.Synchronize().ok());
    for (size_t j = 0; j < sums.size(); ++j) {
      EXPECT_EQ(sums[j], XXH3_64bits(refs[j].data(), refs[j].size()))
          << "GPU checksum of block " << blocks[j] << " (" << bytes[j] << " bytes)";
    }
    return sums;
  }

  // The first `bytes` of T0 slot `slot`, read through this side's mapping of T0.
  std::vector<std::byte> ReadT0(const Side& side, uint32_t slot, uint32_t bytes) {
    std::vector<std::byte> out(bytes);
    EXPECT_TRUE(
        gpu::CopyAsync(out.data(), side.gpu->T0SlotData(slot), bytes, stream_.handle()).ok());
    EXPECT_TRUE(stream_.Synchronize().ok());
    return out;
  }

  // Gets keys (block i of blocks[i]) from `tier` through `side`, compares every byte with the
  // references, releases. The slots read.
  std::vector<uint32_t> ExpectServed(const Side& side, Tier tier, const std::vector<BlockKey>& keys,
                                     const std::vector<size_t>& blocks) {
    auto got = side.client->Get(keys, tier);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return {};
    std::vector<uint32_t> slots;
    for (size_t i = 0; i < keys.size(); ++i) {
      const BlockResult& r = (*got)[i];
      EXPECT_EQ(r.code, uint32_t(BlockCode::kOk)) << TierName(tier) << " get of block " << i;
      slots.push_back(r.slot);
      const std::vector<std::byte> want = Reference(blocks[i]);
      if (r.code != uint32_t(BlockCode::kOk) || r.payload_bytes != want.size()) {
        ADD_FAILURE() << "block " << i << ": " << r.payload_bytes << " bytes, want " << want.size();
        continue;
      }
      const std::vector<std::byte> bytes =
          tier == Tier::kT0
              ? ReadT0(side, r.slot, r.payload_bytes)
              : std::vector<std::byte>(side.client->SlotData(r.slot),
                                       side.client->SlotData(r.slot) + r.payload_bytes);
      EXPECT_TRUE(bytes == want) << TierName(tier) << " copy of block " << i << " differs";
    }
    EXPECT_TRUE(side.client->Release(keys).ok());
    return slots;
  }

  // Tiers of each key (all must be cached).
  std::vector<TierMask> Where(const Side& side, const std::vector<BlockKey>& keys) {
    auto hit = side.client->Lookup(keys);
    EXPECT_TRUE(hit.ok()) << hit.status();
    if (!hit.ok()) return {};
    EXPECT_EQ(hit->hit_blocks, keys.size());
    return hit->tiers;
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
  std::vector<std::unique_ptr<Side>> sides_;
  gpu::Stream stream_;
  std::unique_ptr<GpuChecksummer> checksummer_;
  uint64_t* sums_ = nullptr;  // device memory, kMaxBlocks checksums
};

// T0 working slots filled and hashed on the GPU, published in T0 where they lie: another client
// finds them in T0 only, reads them in place from T0, and a T1 get (the daemon copies T0 -> T1)
// returns the same bytes.
TEST_F(GpuClientWorkTest, T0WorkingSlotsHashedOnTheGpuArePublishedAndServedFromT0AndT1) {
  StartDaemon(Flags("64MiB", /*t2=*/false));
  Side* writer = Open("writer");
  Side* reader = Open("reader");
  ASSERT_TRUE(writer != nullptr && reader != nullptr);
  const std::vector<size_t> blocks = {0, 1, 2, 3, 4, 5};
  const std::vector<BlockKey> keys = testing::SeqKeys(*writer->client, 1, blocks.size());
  auto taken = writer->client->TakeWorkingSlots(Tier::kT0, blocks.size());
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(Codes(*taken), std::vector<BlockCode>(blocks.size(), BlockCode::kOk));
  std::vector<uint32_t> slots;
  for (const BlockResult& r : *taken) {
    EXPECT_EQ(r.payload_bytes, writer->client->t0()->slot_bytes);
    slots.push_back(r.slot);
  }
  const std::vector<uint64_t> sums = FillAndHash(*writer, slots, blocks);
  ASSERT_FALSE(HasFailure());
  std::vector<WorkPublishItem> items;
  for (size_t i = 0; i < blocks.size(); ++i) {
    items.push_back({keys[i], i == 0 ? std::nullopt : std::optional<BlockKey>(keys[i - 1]), sums[i],
                     slots[i], BytesOf(blocks[i])});
  }
  auto published = writer->client->PublishWorking(Tier::kT0, items);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(*published, std::vector<BlockCode>(blocks.size(), BlockCode::kOk)) << daemon_->Log();
  for (TierMask m : Where(*reader, keys)) EXPECT_EQ(m, TierBit(Tier::kT0)) << "born in T0 only";

  EXPECT_EQ(ExpectServed(*reader, Tier::kT0, keys, blocks), slots) << "published where it lies";
  ExpectServed(*reader, Tier::kT1, keys, blocks);
  for (TierMask m : Where(*reader, keys)) {
    EXPECT_EQ(m, TierBit(Tier::kT0) | TierBit(Tier::kT1)) << "the T1 get copied T0 -> T1";
  }
  ASSERT_TRUE(writer->client->Release(keys).ok());
  EXPECT_EQ(reader->client->Stats()->leases_held, 0u);
}

// put_begin with tier 0: slots in T0 filled and hashed on the GPU, committed with the GPU's
// checksums; a second client's T0 get reads the same bytes in place, and its T1 get through T1.
TEST_F(GpuClientWorkTest, ATier0PutFilledOnTheGpuIsServedFromT0ToAnotherClient) {
  StartDaemon(Flags("64MiB", /*t2=*/false));
  Side* writer = Open("writer");
  Side* reader = Open("reader");
  ASSERT_TRUE(writer != nullptr && reader != nullptr);
  const std::vector<size_t> blocks = {6, 7, 8, 9};
  const std::vector<BlockKey> keys = testing::SeqKeys(*writer->client, 2, blocks.size());
  std::vector<protocol::PutBeginItem> begin;
  for (size_t i = 0; i < blocks.size(); ++i) {
    begin.push_back({keys[i], i == 0 ? std::nullopt : std::optional<BlockKey>(keys[i - 1]),
                     BytesOf(blocks[i])});
  }
  auto begun = writer->client->PutBegin(begin, Tier::kT0);
  ASSERT_TRUE(begun.ok()) << begun.status();
  ASSERT_EQ(Codes(*begun), std::vector<BlockCode>(blocks.size(), BlockCode::kOk));
  std::vector<uint32_t> slots;
  for (const BlockResult& r : *begun) slots.push_back(r.slot);
  EXPECT_EQ(reader->client->Lookup(keys)->hit_blocks, 0u) << "not visible before the commit";
  const std::vector<uint64_t> sums = FillAndHash(*writer, slots, blocks);
  ASSERT_FALSE(HasFailure());
  std::vector<protocol::PutCommitItem> commit;
  for (size_t i = 0; i < blocks.size(); ++i) commit.push_back({keys[i], sums[i]});
  auto committed = writer->client->PutCommit(commit);
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(Codes(*committed), std::vector<BlockCode>(blocks.size(), BlockCode::kOk));
  for (TierMask m : Where(*reader, keys)) EXPECT_EQ(m, TierBit(Tier::kT0));
  EXPECT_EQ(ExpectServed(*reader, Tier::kT0, keys, blocks), slots);
  ExpectServed(*reader, Tier::kT1, keys, blocks);
  EXPECT_EQ(reader->client->Stats()->leases_held, 0u) << "a commit leaves no lease";
}

// Blocks born in a T0 of 16 slots, released as they are published: most are pushed down to T1
// (copied, as they have no T1 copy) to make room, the rest are copied to T1 by a T1 get; the
// SIGTERM flush writes all of them to T2, checking the GPU's checksum against the bytes first, and
// after a restart every block comes back from T2 with the same bytes, through T1 and into T0.
TEST_F(GpuClientWorkTest, T0BornBlocksReachT2AndComeBackWithTheSameBytesAfterARestart) {
  const std::vector<std::string> flags = Flags("1MiB", /*t2=*/true);
  StartDaemon(flags);
  constexpr size_t kBlocks = 40;
  std::vector<size_t> blocks(kBlocks);
  for (size_t i = 0; i < kBlocks; ++i) blocks[i] = 20 + i;
  std::vector<BlockKey> keys;
  {
    Side* writer = Open("writer");
    ASSERT_NE(writer, nullptr);
    keys = testing::SeqKeys(*writer->client, 3, kBlocks);
    const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (size_t i = 0; i < kBlocks; ++i) {
      // T0 full of blocks still on their way down: RetryLater until the evictor makes room.
      std::vector<BlockResult> taken;
      for (;;) {
        auto t = writer->client->TakeWorkingSlots(Tier::kT0, 1);
        ASSERT_TRUE(t.ok()) << t.status();
        taken = *t;
        if (taken[0].code != uint32_t(BlockCode::kRetryLater)) break;
        ASSERT_LT(std::chrono::steady_clock::now(), guard) << "T0 never made room\n"
                                                           << daemon_->Log();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a back-off
      }
      ASSERT_EQ(taken[0].code, uint32_t(BlockCode::kOk)) << "block " << i;
      const std::vector<uint64_t> sums = FillAndHash(*writer, {taken[0].slot}, {blocks[i]});
      ASSERT_FALSE(HasFailure());
      const WorkPublishItem item{keys[i],
                                 i == 0 ? std::nullopt : std::optional<BlockKey>(keys[i - 1]),
                                 sums[0], taken[0].slot, BytesOf(blocks[i])};
      auto published =
          writer->client->PublishWorking(Tier::kT0, std::vector<WorkPublishItem>{item});
      ASSERT_TRUE(published.ok()) << published.status();
      ASSERT_EQ(*published, std::vector<BlockCode>{BlockCode::kOk}) << "block " << i;
      ASSERT_TRUE(writer->client->Release(std::vector<BlockKey>{keys[i]}).ok());
    }
    const std::vector<TierMask> where = Where(*writer, keys);
    size_t in_t1 = 0;
    for (TierMask m : where) in_t1 += (m & TierBit(Tier::kT1)) != 0 ? 1 : 0;
    EXPECT_GE(in_t1, kBlocks - 16) << "T0 holds 16 blocks at most";
    ExpectServed(*writer, Tier::kT1, keys, blocks);  // copies the rest T0 -> T1
    for (TierMask m : Where(*writer, keys)) EXPECT_NE(m & TierBit(Tier::kT1), 0);
    sides_.clear();
  }
  const int status = daemon_->Stop(SIGTERM);
  EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
  const std::string log = daemon_->Log();
  EXPECT_TRUE(absl::StrContains(log, "flushed T1: 40 blocks written to T2, 0 not")) << log;
  EXPECT_FALSE(absl::StrContains(log, "no longer matches the checksum")) << log;
  daemon_.reset();

  StartDaemon(flags);
  Side* reader = Open("reader");
  ASSERT_NE(reader, nullptr);
  for (TierMask m : Where(*reader, keys)) EXPECT_EQ(m, TierBit(Tier::kT2));
  const std::vector<BlockKey> first(keys.begin(), keys.begin() + 8);
  ExpectServed(*reader, Tier::kT0, first,
               std::vector<size_t>(blocks.begin(), blocks.begin() + 8));  // T2 -> T1 -> T0
  ExpectServed(*reader, Tier::kT1, keys, blocks);
  EXPECT_EQ(reader->client->Stats()->leases_held, 0u);
}

}  // namespace
}  // namespace kvtier
