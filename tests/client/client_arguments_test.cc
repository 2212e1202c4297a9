// The C++ client against a real kvtierd: arguments out of range are refused before anything is
// sent or copied, with an error naming them, and the connection stays usable (issue 11); a
// namespace's key_source is honoured; a key repeated in one put is written once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/kvtier_client.h"
#include "tests/daemon/config_test_util.h"
#include "tests/daemon/kvtierd_process.h"
#include "tests/daemon/kvtierd_test_util.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;
using ::testing::HasSubstr;
using testing::ItNamespace;
using testing::KvtierdProcess;

const std::vector<std::string> kSmallTiers = {
    "--t1.capacity_bytes", "4MiB", "--t1.slot_bytes", "16KiB", "--t1.dma_chunk_bytes", "1MiB",
    "--t1.touch_threads",  "1",    "--t1.huge_pages", "off",   "--t2.capacity_bytes",  "4MiB"};

// An address range of `bytes` that no one may touch: a copy out of it crashes the test, so a call
// that returns an error having been given it proves it refused before copying anything.
class Untouchable {
 public:
  explicit Untouchable(size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  ~Untouchable() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }
  absl::Span<const std::byte> span() const { return {base_, bytes_}; }
  bool ok() const { return base_ != nullptr; }

 private:
  size_t bytes_;
  std::byte* base_ = nullptr;
};

class ClientArgumentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = KvtierdProcess::Start(tmp_.path(), kSmallTiers);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  std::unique_ptr<client::Client> Connect(const Namespace& ns, const std::string& name) {
    auto c = testing::ConnectTo(*daemon_, ns, name);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  testing::TempDir tmp_;
  std::unique_ptr<KvtierdProcess> daemon_;
};

// The bug: 4 GiB + 16 bytes was cut to 16 for put_begin, and then all of it was copied into the
// 16 KiB slot, over other clients' blocks in T1. Now it is refused before any byte is read.
TEST_F(ClientArgumentsTest, PutOfMoreThan4GiBIsRefusedBeforeAnyCopy) {
  auto other = Connect(ItNamespace(), "other");
  auto c = Connect(ItNamespace(), "huge");
  ASSERT_TRUE(other && c);
  const std::vector<BlockKey> others = testing::SeqKeys(*other, 1, 64);
  ASSERT_TRUE(testing::PutRetrying(*other, others).ok());

  Untouchable huge((size_t{4} << 30) + 16);
  ASSERT_TRUE(huge.ok());
  const std::vector<BlockKey> keys = testing::SeqKeys(*c, 2, 1);
  const std::vector<absl::Span<const std::byte>> payloads = {huge.span()};
  auto put = c->Put(keys, payloads);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(put.status().message(), HasSubstr("payloads[0] is 4294967312 bytes"));
  EXPECT_THAT(put.status().message(), HasSubstr("1 to 16384"));

  // The same client goes on working, and nobody's blocks were touched.
  auto good = testing::PutKeys(*c, keys);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ((*good)[0], BlockCode::kOk);
  EXPECT_TRUE(testing::CheckAll(*other, others).ok());
  EXPECT_TRUE(testing::CheckAll(*c, keys).ok());
}

// Sizes the daemon would take for a malformed request (closing the connection, so that the next
// call failed with a confusing error) are refused by the library, naming the argument.
TEST_F(ClientArgumentsTest, BadSizesAreRefusedAndTheConnectionStaysUsable) {
  auto c = Connect(ItNamespace(), "sizes");
  ASSERT_TRUE(c);
  const std::vector<BlockKey> keys = testing::SeqKeys(*c, 3, 2);
  const std::vector<std::byte> empty, too_big(c->slot_bytes() + 1), fine(100);

  auto zero = c->Put(keys, {absl::Span<const std::byte>(fine), absl::Span<const std::byte>(empty)});
  EXPECT_THAT(zero.status().message(), HasSubstr("payloads[1] is 0 bytes"));
  auto big = c->Put({keys[0]}, {absl::Span<const std::byte>(too_big)});
  EXPECT_THAT(big.status().message(), HasSubstr("payloads[0] is 16385 bytes"));
  auto count = c->Put(keys, {absl::Span<const std::byte>(fine)});
  EXPECT_THAT(count.status().message(), HasSubstr("2 keys but 1 payloads"));

  auto begin0 = c->PutBegin({{keys[0], std::nullopt, 0}});
  EXPECT_THAT(begin0.status().message(), HasSubstr("items[0].payload_bytes"));
  std::vector<protocol::PutBeginItem> many(protocol::kMaxBatchKeys + 1,
                                           {keys[0], std::nullopt, 100});
  auto begin_many = c->PutBegin(many);
  EXPECT_THAT(begin_many.status().message(), HasSubstr("1025 keys in one request"));
  std::vector<protocol::PutCommitItem> commits(protocol::kMaxBatchKeys + 1, {keys[0], 0});
  EXPECT_EQ(c->PutCommit(commits).status().code(), absl::StatusCode::kInvalidArgument);
  auto none = c->PutBegin({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(c->SlotData(UINT32_MAX), nullptr);

  // Nothing above reached the daemon: the connection is as good as new.
  ASSERT_TRUE(c->Nop().ok());
  auto good = testing::PutKeys(*c, keys);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_THAT(*good, ::testing::Each(BlockCode::kOk));
  EXPECT_TRUE(testing::CheckAll(*c, keys).ok());
  auto stats = c->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->requests_invalid, 0u);
}

// key_source = engine_hash: keys come from the engine's own hashes, folded under the namespace
// root; token keys for it are an error, and so are engine-hash keys for a token namespace.
TEST_F(ClientArgumentsTest, EngineHashNamespacesTakeEngineHashesOnly) {
  Namespace ns = ItNamespace("engine");
  ns.key_source = KeySource::kEngineHash;
  auto engine = Connect(ns, "engine-hash");
  auto tokens = Connect(ItNamespace("engine"), "tokens");
  ASSERT_TRUE(engine && tokens);

  auto from_tokens = engine->KeysFor(std::vector<uint32_t>(8, 1));
  ASSERT_FALSE(from_tokens.ok());
  EXPECT_EQ(from_tokens.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(from_tokens.status().message(), HasSubstr("key_source = engine_hash"));
  auto from_hashes_on_tokens = tokens->KeysForEngineHashes(std::vector<uint64_t>{1, 2});
  EXPECT_EQ(from_hashes_on_tokens.status().code(), absl::StatusCode::kFailedPrecondition);

  const std::vector<uint64_t> hashes = {0x1111, 0x2222, 0x3333};
  auto keys = engine->KeysForEngineHashes(hashes);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->size(), 3u);
  BlockKey want = NamespaceRoot(ns);
  for (size_t i = 0; i < hashes.size(); ++i) {
    want = ChainEngineHash(want, hashes[i]);
    EXPECT_EQ((*keys)[i], want) << i;
  }
  auto tail = engine->KeysForEngineHashes(absl::MakeSpan(hashes).subspan(1), (*keys)[0]);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ((*tail)[1], (*keys)[2]);  // a sequence continues from a parent

  auto put = testing::PutKeys(*engine, *keys);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_THAT(*put, ::testing::Each(BlockCode::kOk));
  auto hit = engine->Lookup(*keys);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->hit_blocks, 3u);
  EXPECT_TRUE(testing::CheckAll(*engine, *keys).ok());
  // The same keys under a token namespace of the same model are another namespace's: no hit.
  auto other = tokens->Lookup(*keys);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->hit_blocks, 0u);
}

// A key given twice in one put is written once, from its first payload; the repeat is
// ALREADY_PRESENT (it was MISSING). Raw put_begin/put_commit say the same.
TEST_F(ClientArgumentsTest, ARepeatedKeyIsWrittenOnce) {
  auto c = Connect(ItNamespace(), "repeats");
  ASSERT_TRUE(c);
  const std::vector<BlockKey> seq = testing::SeqKeys(*c, 4, 3);
  const std::vector<std::byte> first = testing::Payload(seq[0]);
  const std::vector<std::byte> second(first.size(), std::byte{0x77});
  const std::vector<std::byte> other = testing::Payload(seq[1]);
  auto before = c->Stats();
  ASSERT_TRUE(before.ok());
  auto put = c->Put({seq[0], seq[0], seq[1]},
                    {absl::Span<const std::byte>(first), absl::Span<const std::byte>(second),
                     absl::Span<const std::byte>(other)});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_THAT(*put,
              ::testing::ElementsAre(BlockCode::kOk, BlockCode::kAlreadyPresent, BlockCode::kOk));
  auto after = c->Stats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->puts_begun - before->puts_begun, 2u);      // one slot for the repeated key
  EXPECT_TRUE(testing::CheckAll(*c, {seq[0], seq[1]}).ok());  // the first payload won

  auto begun = c->PutBegin({{seq[2], seq[1], 64}, {seq[2], seq[1], 64}});
  ASSERT_TRUE(begun.ok()) << begun.status();
  EXPECT_EQ((*begun)[0].code, static_cast<uint32_t>(BlockCode::kOk));
  EXPECT_EQ((*begun)[1].code, static_cast<uint32_t>(BlockCode::kAlreadyPresent));
  EXPECT_EQ((*begun)[1].slot, 0u);
  std::memset(c->MutableSlotData((*begun)[0].slot), 0x42, 64);
  auto committed = c->PutCommit({{seq[2], 0}, {seq[2], 0}});
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ((*committed)[0].code, static_cast<uint32_t>(BlockCode::kOk));
  EXPECT_EQ((*committed)[1].code, static_cast<uint32_t>(BlockCode::kAlreadyPresent));
  ASSERT_TRUE(c->Nop().ok());
}

}  // namespace
}  // namespace kvtier
