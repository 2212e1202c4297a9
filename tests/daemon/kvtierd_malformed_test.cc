// A real kvtierd fed malformed input by hand-made clients (DESIGN.md "Process model and
// protocol": every message is versioned and length-checked; malformed input closes that client's
// connection and never crashes or corrupts the daemon). Each bad Hello — garbage, a bad magic or
// version, an oversized length, the wrong first frame, a bad payload or namespace, a frame cut
// short — bytes after Hello, and each malformed ring record close only that client: a client
// connected all along keeps its blocks and its service, and new clients are welcome.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "client/protocol/record_codec.h"
#include "client/protocol/shm_region.h"
#include "client/protocol/spsc_ring.h"
#include "tests/daemon/kvtierd_test_util.h"

namespace kvtier {
namespace {

using protocol::FrameHeader;
using protocol::UniqueFd;
using testing::ItNamespace;
using testing::KvtierdProcess;
using testing::PutKeys;
using testing::SeqKeys;

UniqueFd RawConnect(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval guard{60, 0};  // a hang guard: a daemon that never answers fails the test
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
  return fd;
}

std::vector<std::byte> GoodHello(const Namespace& ns = ItNamespace()) {
  return *protocol::EncodeHello(protocol::Hello{ns, "raw"});
}

std::vector<std::byte> Header(uint32_t magic, uint16_t version, uint16_t type, uint32_t bytes) {
  const FrameHeader h{magic, version, type, bytes, 0};
  std::vector<std::byte> out(sizeof(h));
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}

// What the daemon did with a connection: the code of the Error frame it sent (if any), and
// whether it then ended the stream.
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
    if (error.ok()) a.error = error->code;
    if (error.ok()) a.message = error->message;
    frame = protocol::RecvFrame(fd, 0);
  }
  a.closed = !frame.ok() && frame.status().code() == absl::StatusCode::kUnavailable;
  return a;
}

class KvtierdMalformedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = KvtierdProcess::Start(
        dir_.path(),
        {"--t1.capacity_bytes", "4MiB", "--t1.slot_bytes", "16KiB", "--t1.dma_chunk_bytes", "1MiB",
         "--t1.touch_threads", "1", "--t1.huge_pages", "off", "--t2.capacity_bytes", "4MiB"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    auto c = testing::ConnectTo(*daemon_, ItNamespace(), "good");
    ASSERT_TRUE(c.ok()) << c.status();
    good_ = std::move(*c);
    keys_ = SeqKeys(*good_, 1, 4);
    ASSERT_EQ(*PutKeys(*good_, keys_),
              std::vector<protocol::BlockCode>(4, protocol::BlockCode::kOk));
  }

  // Whatever the test did to it, the daemon stops cleanly on SIGTERM (under ASan: nothing leaked).
  void TearDown() override {
    if (daemon_ == nullptr) return;
    const int status = daemon_->Stop(SIGTERM);
    EXPECT_TRUE(testing::ExitedZero(status))
        << "after SIGTERM: " << testing::DescribeWaitStatus(status) << "\n"
        << daemon_->Log();
  }

  // The client connected all along is served and sees its blocks whole; a new one is welcome.
  void ExpectOthersServed(const std::string& what) {
    auto hit = good_->Lookup(keys_);
    ASSERT_TRUE(hit.ok()) << what << ": " << hit.status() << "\n" << daemon_->Log();
    EXPECT_EQ(hit->hit_blocks, keys_.size()) << what;
    EXPECT_TRUE(testing::CheckAll(*good_, keys_).ok()) << what;
    auto fresh = testing::ConnectTo(*daemon_, ItNamespace(), "fresh");
    EXPECT_TRUE(fresh.ok()) << what << ": " << fresh.status();
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
  std::unique_ptr<client::Client> good_;
  std::vector<BlockKey> keys_;
};

TEST_F(KvtierdMalformedTest, BadHellosCloseOnlyThatClient) {
  using protocol::kFrameMagic;
  using protocol::kProtocolVersion;
  Namespace bad_ns = ItNamespace();
  bad_ns.block_tokens = 3;  // not a power of two: the daemon refuses the namespace
  std::vector<std::byte> bad_magic = GoodHello();
  bad_magic[0] = std::byte{'X'};
  std::vector<std::byte> bad_payload = Header(kFrameMagic, kProtocolVersion, 1, 40);
  bad_payload.resize(bad_payload.size() + 40, std::byte{0xFF});
  const std::vector<std::byte> hello = GoodHello();
  struct Case {
    std::string name;
    std::vector<std::byte> bytes;
    bool error_frame;  // else the daemon just closes (it never got a whole frame)
  };
  const std::vector<Case> cases = {
      {"garbage", std::vector<std::byte>(64, std::byte{0xAB}), true},
      {"bad magic", bad_magic, true},
      {"bad version", Header(kFrameMagic, kProtocolVersion + 1, 1, 0), true},
      {"oversized length", Header(kFrameMagic, kProtocolVersion, 1, protocol::kMaxFramePayload + 1),
       true},
      {"length 4 GiB", Header(kFrameMagic, kProtocolVersion, 1, 0xFFFFFFFFu), true},
      {"Welcome first", Header(kFrameMagic, kProtocolVersion, 2, 0), true},
      {"unknown frame type", Header(kFrameMagic, kProtocolVersion, 77, 0), true},
      {"bad Hello payload", bad_payload, true},
      {"bad namespace", GoodHello(bad_ns), true},
      {"truncated Hello", std::vector<std::byte>(hello.begin(), hello.begin() + hello.size() / 2),
       false},
      {"truncated header", std::vector<std::byte>(hello.begin(), hello.begin() + 7), false},
  };
  for (const Case& c : cases) {
    UniqueFd fd = RawConnect(daemon_->socket_path());
    ASSERT_EQ(::send(fd.get(), c.bytes.data(), c.bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(c.bytes.size()))
        << c.name;
    if (!c.error_frame) ::shutdown(fd.get(), SHUT_WR);  // the rest never comes
    const Answer a = ReadAnswer(fd.get());
    EXPECT_EQ(a.error.has_value(), c.error_frame) << c.name << ": " << a.message;
    EXPECT_TRUE(a.closed) << c.name;
    ExpectOthersServed(c.name);
  }
}

// A hand-made client: handshake by the book, then whatever bytes it likes.
struct RawClient {
  UniqueFd socket;
  std::unique_ptr<protocol::ShmRegion> region;
  std::unique_ptr<protocol::EventFd> daemon_bell;
};

RawClient Handshake(const std::string& path) {
  RawClient raw;
  raw.socket = RawConnect(path);
  EXPECT_TRUE(protocol::SendFrame(raw.socket.get(), GoodHello()).ok());
  auto welcome_frame = protocol::RecvFrame(raw.socket.get(), protocol::kWelcomeFdCount);
  EXPECT_TRUE(welcome_frame.ok()) << welcome_frame.status();
  auto welcome = protocol::DecodeWelcome(welcome_frame->payload);
  raw.region = *protocol::ShmRegion::Map(std::move(welcome_frame->fds[protocol::kFdRegion]),
                                         welcome->layout);
  raw.daemon_bell =
      std::make_unique<protocol::EventFd>(std::move(welcome_frame->fds[protocol::kFdDaemonBell]));
  return raw;
}

TEST_F(KvtierdMalformedTest, BytesAfterHelloCloseOnlyThatClient) {
  RawClient raw = Handshake(daemon_->socket_path());
  ASSERT_EQ(::send(raw.socket.get(), "?", 1, MSG_NOSIGNAL), 1);
  const Answer a = ReadAnswer(raw.socket.get());
  EXPECT_EQ(a.error, absl::StatusCode::kInvalidArgument) << a.message;
  EXPECT_TRUE(a.closed);
  ExpectOthersServed("bytes after Hello");
}

TEST_F(KvtierdMalformedTest, MalformedRingRecordsCloseOnlyThatClient) {
  const std::vector<std::pair<std::string, std::function<void(std::byte*)>>> corruptions = {
      {"garbage", [](std::byte* r) { std::memset(r, 0xAB, protocol::kRecordBytes); }},
      {"bad magic", [](std::byte* r) { r[0] = std::byte{0}; }},
      {"bad version", [](std::byte* r) { r[2] = std::byte{9}; }},
      {"unknown op", [](std::byte* r) { r[3] = std::byte{200}; }},
      {"bad record size", [](std::byte* r) { r[4] = std::byte{32}; }},
      {"arguments outside the arena", [](std::byte* r) { std::memset(r + 24, 0xFF, 4); }},
      {"count too large", [](std::byte* r) { std::memset(r + 16, 0xFF, 2); }},
      {"reserved bytes set", [](std::byte* r) { r[50] = std::byte{1}; }},
  };
  for (const auto& [name, corrupt] : corruptions) {
    RawClient raw = Handshake(daemon_->socket_path());
    protocol::Request request{protocol::Op::kLookup, 1, 1, 0, {0, 16}, {16, 8}};
    std::byte record[protocol::kRecordBytes];
    protocol::EncodeRequest(request, record);
    corrupt(record);
    protocol::RingProducer producer(raw.region->submission(), raw.daemon_bell.get());
    ASSERT_TRUE(*producer.TryPush(record)) << name;
    const Answer a = ReadAnswer(raw.socket.get());
    EXPECT_EQ(a.error, absl::StatusCode::kInvalidArgument) << name << ": " << a.message;
    EXPECT_TRUE(a.closed) << name;
    ExpectOthersServed(name);
  }
  EXPECT_GE(good_->Stats()->requests_invalid, corruptions.size());
}

}  // namespace
}  // namespace kvtier
