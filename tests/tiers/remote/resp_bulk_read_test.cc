// RespConnection::ReadBulk: a GET's value received straight into the caller's memory. Against a
// real redis-server for what a store does (values of any size, nil, errors, pipelines that must
// stay in step), and against FakeRespServer for the faults no real store makes: every byte from
// the store is hostile, so a cut, stalled, oversized or malformed reply is an error and never
// writes past the memory the caller placed.
#include <gtest/gtest.h>
#include <hiredis.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/log.h"
#include "tests/tiers/remote/fake_resp_server.h"
#include "tests/tiers/remote/remote_store_test_util.h"
#include "tiers/remote/remote_value.h"

namespace kvtier::testing {
namespace {

constexpr uint8_t kCanary = 0xAB;
constexpr size_t kCanaryBytes = 4096;

// Places `place` bytes (or fewer when the value is shorter) of a buffer followed by a canary.
class BufferSink final : public BulkSink {
 public:
  explicit BufferSink(size_t place) : buffer(place + kCanaryBytes, kCanary), place_(place) {}
  absl::Span<const iovec> Place(size_t len) override {
    announced = len;
    ++calls;
    iov_ = iovec{buffer.data(), place_};
    return {&iov_, 1};
  }
  bool CanaryIntact() const {
    for (size_t i = place_; i < buffer.size(); ++i) {
      if (buffer[i] != kCanary) return false;
    }
    return true;
  }
  std::string_view Bytes(size_t n) const {
    return {reinterpret_cast<const char*>(buffer.data()), n};
  }

  std::vector<uint8_t> buffer;
  size_t announced = 0;
  int calls = 0;

 private:
  size_t place_;
  iovec iov_{};
};

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

std::unique_ptr<RespConnection> ConnectTo(const RespEndpoint& endpoint,
                                          uint32_t command_timeout_ms = 10000) {
  RespConnectionOptions options;
  options.command_timeout_ms = command_timeout_ms;
  auto c = RespConnection::Connect(endpoint, options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(RespBulkRead, ValuesNilAndErrorsOfARealStoreInOnePipelineStayInStep) {
  if (const std::string skip = RedisSkipReason(); !skip.empty()) GTEST_SKIP() << skip;
  RedisTempDir dir;
  auto server = RedisServer::Start(dir.path() + "/s", {});
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = ConnectTo((*server)->endpoint());
  ASSERT_NE(c, nullptr);
  const std::string big = RandomBytes((300 << 10) + 7, 1), small = "0123456789";
  ASSERT_TRUE(c->Command({"SET", "big", big}).ok());
  ASSERT_TRUE(c->Command({"SET", "small", small}).ok());
  for (const char* key : {"big", "small", "absent"}) c->Append(FormatCommand({"GET", key}));
  c->Append(FormatCommand({"GET"}));  // wrong arity: an error reply
  c->Append(FormatCommand({"PING"}));
  BufferSink whole(big.size()), part(4), nil(16), error(16);
  auto r1 = c->ReadBulk("GET", whole);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(*r1, nullptr);
  EXPECT_EQ(whole.announced, big.size());
  EXPECT_TRUE(whole.Bytes(big.size()) == big);
  EXPECT_TRUE(whole.CanaryIntact());
  auto r2 = c->ReadBulk("GET", part);  // 4 of 10 bytes placed: the rest is read and dropped
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(*r2, nullptr);
  EXPECT_EQ(part.announced, small.size());
  EXPECT_EQ(part.Bytes(4), "0123");
  EXPECT_TRUE(part.CanaryIntact());
  auto r3 = c->ReadBulk("GET", nil);
  ASSERT_TRUE(r3.ok()) << r3.status();
  ASSERT_NE(*r3, nullptr);
  EXPECT_EQ((*r3)->type, REDIS_REPLY_NIL);
  EXPECT_EQ(nil.calls, 0);
  auto r4 = c->ReadBulk("GET", error);
  ASSERT_TRUE(r4.ok()) << r4.status();
  ASSERT_NE(*r4, nullptr);
  EXPECT_EQ((*r4)->type, REDIS_REPLY_ERROR);
  auto pong = c->ReadReply("PING");
  ASSERT_TRUE(pong.ok()) << pong.status();
  EXPECT_EQ(std::string_view((*pong)->str, (*pong)->len), "PONG");
  EXPECT_FALSE(c->broken());
}

// Sends one GET to a FakeRespServer answering `reply`; the status ReadBulk returns.
absl::Status BulkFromFake(const std::string& reply, bool close_after, BufferSink& sink,
                          uint32_t command_timeout_ms = 10000) {
  FakeRespServer fake(reply, close_after);
  auto c = ConnectTo(fake.endpoint(), command_timeout_ms);
  if (c == nullptr) return absl::InternalError("no connection");
  c->Append(FormatCommand({"GET", "k"}));
  auto r = c->ReadBulk("GET", sink);
  EXPECT_TRUE(!r.ok() || *r == nullptr || (*r)->type != REDIS_REPLY_STRING);
  if (!r.ok()) {
    EXPECT_TRUE(c->broken()) << r.status();
  }
  return r.status();
}

TEST(RespBulkRead, AValueCutMidPayloadIsAnErrorAndWritesNothingPastTheSink) {
  BufferSink sink(100);
  const absl::Status s = BulkFromFake("$100\r\n" + std::string(50, 'x'), true, sink);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(sink.announced, 100u);
  EXPECT_TRUE(sink.CanaryIntact());
}

TEST(RespBulkRead, AStoreThatStallsMidPayloadTimesOut) {
  BufferSink sink(100);
  const absl::Status s = BulkFromFake("$100\r\n" + std::string(50, 'x'), false, sink, 200);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(sink.CanaryIntact());
}

TEST(RespBulkRead, ALengthPastTheLimitIsRefusedBeforeAnyByteIsPlaced) {
  BufferSink sink(64);
  const absl::Status s = BulkFromFake(
      "$" + std::to_string(kMaxBulkBytes + 1) + "\r\n" + std::string(64, 'x'), false, sink);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_EQ(sink.calls, 0);
  EXPECT_TRUE(sink.CanaryIntact());
}

TEST(RespBulkRead, MalformedLengthsAreProtocolErrors) {
  for (const std::string& reply :
       {std::string("$12a\r\nxxxxxxxxxxxx\r\n"), std::string("$-5\r\n"), std::string("$\r\n"),
        std::string("$99999999999999999999999\r\n"), std::string("$") + std::string(40, '1')}) {
    BufferSink sink(64);
    const absl::Status s = BulkFromFake(reply, false, sink);
    EXPECT_TRUE(absl::IsInternal(s)) << log::EscapeForLog(reply) << ": " << s;
    EXPECT_EQ(sink.calls, 0);
  }
}

TEST(RespBulkRead, AValueNotFollowedByCrlfIsAProtocolError) {
  BufferSink sink(3);
  const absl::Status s = BulkFromFake("$3\r\nabcXY", false, sink);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_EQ(sink.Bytes(3), "abc");
  EXPECT_TRUE(sink.CanaryIntact());
}

TEST(RespBulkRead, AStoreGetCutMidValueIsAnItemErrorNeverAHit) {
  const std::string value(kRemoteHeaderBytes + 1000, 'v');
  FakeRespServer fake("$" + std::to_string(value.size()) + "\r\n" + value.substr(0, 500), true);
  RemoteStoreOptions options = TestStoreOptions({fake.endpoint().Name()});
  options.cluster = ClusterMode::kStandalone;
  options.command_timeout_ms = 300;  // the retry's connection is never served
  auto store = RemoteStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<uint8_t> dst(1000 + kCanaryBytes, kCanary);
  RemoteGetItem item;
  item.key = BlockKey{1, 2};
  item.namespace_id = kTestNamespace;
  item.dst = dst.data();
  item.dst_bytes = 1000;
  EXPECT_FALSE((*store)->Get(absl::MakeSpan(&item, 1)).ok());
  EXPECT_EQ(item.outcome, RemoteOutcome::kError);
  for (size_t i = 1000; i < dst.size(); ++i) ASSERT_EQ(dst[i], kCanary) << i;
  EXPECT_EQ((*store)->Stats().hits, 0u);
}

TEST(RespBulkRead, AValidValueLargerThanTheBufferIsAnOversizeMissAndTheStreamStaysInStep) {
  if (const std::string skip = RedisSkipReason(); !skip.empty()) GTEST_SKIP() << skip;
  RedisTempDir dir;
  auto server = RedisServer::Start(dir.path() + "/s", {});
  ASSERT_TRUE(server.ok()) << server.status();
  RemoteStoreOptions options = TestStoreOptions({(*server)->address()});
  options.pool_per_node = 1;  // both Gets on one connection
  auto store = RemoteStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<BlockKey> keys = TestKeys(2, 77);
  ASSERT_TRUE(PutPattern(**store, {keys[0]}, 256 << 10).ok());
  ASSERT_TRUE(PutPattern(**store, {keys[1]}, 1000).ok());
  std::vector<uint8_t> dst((100 << 10) + kCanaryBytes, kCanary);
  RemoteGetItem items[2];
  for (int i = 0; i < 2; ++i) {
    items[i].key = keys[static_cast<size_t>(i)];
    items[i].namespace_id = kTestNamespace;
    items[i].dst = dst.data();
    items[i].dst_bytes = 100 << 10;
  }
  ASSERT_TRUE((*store)->Get(absl::MakeSpan(items, 1)).ok());
  EXPECT_EQ(items[0].outcome, RemoteOutcome::kMiss);
  for (size_t i = 100 << 10; i < dst.size(); ++i) ASSERT_EQ(dst[i], kCanary) << i;
  ASSERT_TRUE((*store)->Get(absl::MakeSpan(items + 1, 1)).ok());
  EXPECT_EQ(items[1].outcome, RemoteOutcome::kHit);
  EXPECT_TRUE(MatchesPattern(keys[1], dst.data(), 1000));
  const RemoteStoreStats s = (*store)->Stats();
  EXPECT_EQ(s.oversize_values, 1u);
  EXPECT_EQ(s.corrupt_values, 0u);
  EXPECT_EQ(s.router.connects, 1u);
}

}  // namespace
}  // namespace kvtier::testing
