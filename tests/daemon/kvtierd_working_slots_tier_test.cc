// Working slots end to end (kvtierd_working_slots_test.cc has the rest): tier 0 against a daemon
// without T0, refused by the client before it sends and, sent raw, by the daemon with an Error
// naming the request (only that connection closed); and published T1 blocks written to T2 by
// flush_on_stop with the checksum given at publish, served after a restart.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "client/protocol/record_codec.h"
#include "client/protocol/shm_region.h"
#include "client/protocol/spsc_ring.h"
#include "tests/daemon/working_slots_test_util.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using protocol::WorkPublishItem;
using testing::CheckAll;
using testing::Codes;
using testing::Fill;
using testing::ItNamespace;
using testing::KvtierdProcess;
using testing::KvtierdWorkingSlotsTest;
using testing::SeqKeys;

protocol::UniqueFd RawConnect(const std::string& path) {
  protocol::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval guard{60, 0};  // a hang guard: a daemon that never answers fails the test
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
  return fd;
}

// A hand-made client past its handshake: it pushes whatever records it likes.
struct RawClient {
  protocol::UniqueFd socket;
  std::unique_ptr<protocol::ShmRegion> region;
  std::unique_ptr<protocol::EventFd> daemon_bell;
};

RawClient Handshake(const std::string& path) {
  RawClient raw;
  raw.socket = RawConnect(path);
  EXPECT_TRUE(
      protocol::SendFrame(raw.socket.get(), *protocol::EncodeHello({ItNamespace(), "raw"})).ok());
  auto frame = protocol::RecvFrame(raw.socket.get(), protocol::kWelcomeFdCount);
  EXPECT_TRUE(frame.ok()) << frame.status();
  if (!frame.ok()) return raw;
  auto welcome = protocol::DecodeWelcome(frame->payload);
  EXPECT_TRUE(welcome.ok()) << welcome.status();
  raw.region =
      *protocol::ShmRegion::Map(std::move(frame->fds[protocol::kFdRegion]), welcome->layout);
  raw.daemon_bell =
      std::make_unique<protocol::EventFd>(std::move(frame->fds[protocol::kFdDaemonBell]));
  return raw;
}

// The Error frame the daemon sends (code and text; nullopt when none), and whether it then closed.
struct Answer {
  std::optional<absl::StatusCode> error;
  std::string message;
  bool closed = false;
};

Answer ReadAnswer(int fd) {
  Answer a;
  absl::StatusOr<protocol::ReceivedFrame> frame = protocol::RecvFrame(fd, 0);
  if (frame.ok() && frame->info.type == protocol::FrameType::kError) {
    auto error = protocol::DecodeError(frame->payload);
    if (error.ok()) {
      a.error = error->code;
      a.message = error->message;
    }
    frame = protocol::RecvFrame(fd, 0);
  }
  a.closed = !frame.ok() && frame.status().code() == absl::StatusCode::kUnavailable;
  return a;
}

// The client refuses tier 0 itself when the daemon's Welcome has no T0 (InvalidArgument naming
// the call and the tier; the connection stays usable, so nothing reached the daemon, which would
// have closed it). Records sent raw with tier 0 — a work_take and a put_begin — are answered with
// an Error naming the request and its op, and only that connection is closed.
TEST_F(KvtierdWorkingSlotsTest, Tier0WithoutT0IsRefusedByTheClientAndByTheDaemon) {
  StartDaemon();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_FALSE(c->t0().has_value());
  const std::vector<BlockKey> keys = SeqKeys(*c, 7, 1);
  ASSERT_EQ(*testing::PutKeys(*c, keys), std::vector<BlockCode>{BlockCode::kOk});
  const uint32_t bytes = testing::PayloadBytes(keys[0]);
  const std::vector<BlockKey> new_keys = SeqKeys(*c, 8, 1);
  const protocol::PutBeginItem begin{new_keys[0], std::nullopt, bytes};
  const WorkPublishItem publish{new_keys[0], std::nullopt, 1, 0, bytes};
  const std::vector<std::pair<std::string, absl::Status>> refused = {
      {"TakeWorkingSlots", c->TakeWorkingSlots(Tier::kT0, 1).status()},
      {"PutBegin", c->PutBegin(std::vector<protocol::PutBeginItem>{begin}, Tier::kT0).status()},
      {"PublishWorking",
       c->PublishWorking(Tier::kT0, std::vector<WorkPublishItem>{publish}).status()},
      {"FreeWorking", c->FreeWorking(Tier::kT0, std::vector<uint32_t>{0}).status()},
  };
  for (const auto& [call, status] : refused) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << call << ": " << status;
    EXPECT_TRUE(absl::StrContains(status.message(), call + ": tier T0")) << status;
  }
  EXPECT_TRUE(CheckAll(*c, keys).ok()) << "the connection is still served";
  EXPECT_EQ(c->Stats()->requests_invalid, 0u) << "nothing reached the daemon";

  struct Case {
    protocol::Op op;
    std::string name;
  };
  uint64_t invalid = 0;
  for (const Case& k :
       {Case{protocol::Op::kWorkTake, "work_take"}, Case{protocol::Op::kPutBegin, "put_begin"}}) {
    RawClient raw = Handshake(daemon_->socket_path());
    ASSERT_NE(raw.region, nullptr) << daemon_->Log();
    const uint32_t arg = protocol::ArgBytes(k.op, 1);
    const protocol::Request request{
        k.op,     41,
        1,        static_cast<uint8_t>(Tier::kT0),
        {0, arg}, {(arg + 63) / 64 * 64, protocol::ResultBytes(k.op, 1)}};
    if (k.op == protocol::Op::kPutBegin) {
      protocol::WritePutBegin(raw.region->arena(), request.arg,
                              std::vector<protocol::PutBeginItem>{begin});
    }
    std::byte record[protocol::kRecordBytes];
    protocol::EncodeRequest(request, record);
    protocol::RingProducer producer(raw.region->submission(), raw.daemon_bell.get());
    ASSERT_TRUE(*producer.TryPush(record)) << k.name;
    const Answer a = ReadAnswer(raw.socket.get());
    EXPECT_EQ(a.error, absl::StatusCode::kInvalidArgument) << k.name << ": " << a.message;
    EXPECT_TRUE(absl::StrContains(a.message, "request 41 (" + k.name + "): tier 0")) << a.message;
    EXPECT_TRUE(absl::StrContains(a.message, "without T0")) << a.message;
    EXPECT_TRUE(a.closed) << k.name;
    ++invalid;
    // The well-behaved client is served, sees its block whole, and a new client is welcome.
    EXPECT_TRUE(CheckAll(*c, keys).ok()) << k.name;
    EXPECT_EQ(c->Stats()->requests_invalid, invalid) << k.name;
    EXPECT_NE(Connect("fresh"), nullptr) << k.name;
  }
  EXPECT_EQ(c->Lookup(new_keys)->hit_blocks, 0u);
}

// ---- down to T2 and back ----

// Published T1 blocks, released, are written to T2 by flush_on_stop at SIGTERM with the checksum
// given at publish, and served byte for byte from T2 after a restart. A block published with a
// wrong checksum (verify_puts off: the daemon believes it) is dropped when T2 checks it against
// its bytes, never persisted nor served after the restart. A key then cached only in T2 gains a
// T1 copy when a working slot is published under it.
TEST(KvtierdWorkingSlotsRestartTest, PublishedBlocksReachT2WithTheirChecksumAndServeAfterRestart) {
  testing::TempDir dir;
  std::vector<std::string> flags = testing::kWorkFlags;
  for (const char* f : {"--daemon.flush_on_stop", "true", "--daemon.verify_puts", "false"}) {
    flags.push_back(f);
  }
  auto daemon = KvtierdProcess::Start(dir.path(), flags);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::vector<BlockKey> keys, bad_keys;
  {
    auto c = testing::ConnectTo(**daemon, ItNamespace(), "writer");
    ASSERT_TRUE(c.ok()) << c.status();
    keys = SeqKeys(**c, 9, 3);
    bad_keys = SeqKeys(**c, 10, 1);
    auto taken = (*c)->TakeWorkingSlots(Tier::kT1, 4);
    ASSERT_TRUE(taken.ok()) << taken.status();
    ASSERT_EQ(Codes(*taken), std::vector<BlockCode>(4, BlockCode::kOk));
    std::vector<WorkPublishItem> items;
    for (size_t i = 0; i < keys.size(); ++i) {
      items.push_back(Fill(**c, (*taken)[i].slot, keys[i],
                           i == 0 ? std::nullopt : std::optional<BlockKey>(keys[i - 1])));
    }
    WorkPublishItem bad = Fill(**c, (*taken)[3].slot, bad_keys[0]);
    bad.checksum ^= 0x100;
    items.push_back(bad);
    EXPECT_EQ(*(*c)->PublishWorking(Tier::kT1, items), std::vector<BlockCode>(4, BlockCode::kOk));
    std::vector<BlockKey> all = keys;
    all.push_back(bad_keys[0]);
    ASSERT_TRUE((*c)->Release(all).ok());
    auto hit = (*c)->Lookup(keys);
    ASSERT_TRUE(hit.ok() && hit->hit_blocks == keys.size());
    for (TierMask m : hit->tiers) EXPECT_EQ(m, TierBit(Tier::kT1)) << "in T1 only before the stop";
  }
  const int status = (*daemon)->Stop(SIGTERM);
  EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
  const std::string log = (*daemon)->Log();
  EXPECT_TRUE(absl::StrContains(log, "flushed T1: 3 blocks written to T2")) << log;
  EXPECT_TRUE(absl::StrContains(log, "no longer matches the checksum given at commit")) << log;

  daemon = KvtierdProcess::Start(dir.path(), flags);
  ASSERT_TRUE(daemon.ok()) << daemon.status() << "\nlog before the restart:\n" << log;
  auto c = testing::ConnectTo(**daemon, ItNamespace(), "reader");
  ASSERT_TRUE(c.ok()) << c.status();
  auto hit = (*c)->Lookup(keys);
  ASSERT_TRUE(hit.ok()) << hit.status();
  ASSERT_EQ(hit->hit_blocks, keys.size()) << (*daemon)->Log();
  for (TierMask m : hit->tiers) EXPECT_EQ(m, TierBit(Tier::kT2));
  EXPECT_EQ((*c)->Lookup(bad_keys)->hit_blocks, 0u) << "a block that failed its checksum";
  // Lookups only (a get would promote into T1): the first block gains a T1 copy by publish.
  const std::vector<uint32_t> slot = {(*(*c)->TakeWorkingSlots(Tier::kT1, 1))[0].slot};
  const WorkPublishItem again = Fill(**c, slot[0], keys[0]);
  EXPECT_EQ(*(*c)->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{again}),
            std::vector<BlockCode>{BlockCode::kOk});
  EXPECT_EQ((*c)->Lookup(keys)->tiers[0], TierBit(Tier::kT1) | TierBit(Tier::kT2));
  ASSERT_TRUE((*c)->Release(std::vector<BlockKey>{keys[0]}).ok());
  const absl::Status check = CheckAll(**c, keys);
  EXPECT_TRUE(check.ok()) << check << "\n" << (*daemon)->Log();
  EXPECT_EQ((*c)->Stats()->leases_held, 0u);
  c->reset();
  const int second = (*daemon)->Stop(SIGTERM);
  EXPECT_TRUE(testing::ExitedZero(second)) << testing::DescribeWaitStatus(second);
}

}  // namespace
}  // namespace kvtier
