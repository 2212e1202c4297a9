// Frames and file descriptors over a real Unix-domain socketpair: a memfd passed with a frame is
// the same memory on the other side; the whole handshake between two processes hands over a
// working ring; truncated control data, too many fds and cut frames are errors that leak no fd.
#include "client/protocol/fd_passing.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "client/protocol/shm_region.h"

namespace kvtier::protocol {
namespace {

struct SocketPair {
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a.Reset(fds[0]);
    b.Reset(fds[1]);
  }
  UniqueFd a, b;
};

size_t OpenFds() {
  return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                       std::filesystem::directory_iterator{});
}

UniqueFd MemfdWith(const char* text) {
  UniqueFd fd(memfd_create("test", MFD_CLOEXEC));
  EXPECT_EQ(ftruncate(fd.get(), 4096), 0);
  EXPECT_EQ(pwrite(fd.get(), text, strlen(text), 0), static_cast<ssize_t>(strlen(text)));
  return fd;
}

TEST(FdPassingTest, PassedMemfdMapsToTheSameBytesBothWays) {
  SocketPair s;
  UniqueFd memfd = MemfdWith("kvtier T1 bytes");
  const std::vector<std::byte> frame = EncodeError({absl::StatusCode::kOk, "fd attached"});
  const int fds[] = {memfd.get()};
  ASSERT_TRUE(SendFrame(s.a.get(), frame, fds).ok());
  absl::StatusOr<ReceivedFrame> got = RecvFrame(s.b.get(), 4);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->info.type, FrameType::kError);
  ASSERT_EQ(got->fds.size(), 1u);
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, got->fds[0].get(), 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_STREQ(static_cast<char*>(p), "kvtier T1 bytes");
  std::memcpy(p, "written back", 13);
  char back[13] = {};
  ASSERT_EQ(pread(memfd.get(), back, 13, 0), 13);
  EXPECT_STREQ(back, "written back");
  munmap(p, 4096);
}

TEST(FdPassingTest, HandshakeBetweenTwoProcessesHandsOverAWorkingRing) {
  SocketPair s;
  const pid_t pid = fork();
  if (pid == 0) {  // the daemon's side
    alarm(60);
    absl::StatusOr<ReceivedFrame> hello_frame = RecvFrame(s.b.get(), 0);
    if (!hello_frame.ok() || hello_frame->info.type != FrameType::kHello) _exit(2);
    absl::StatusOr<Hello> hello = DecodeHello(hello_frame->payload);
    absl::StatusOr<ucred> peer = PeerCredentials(s.b.get());
    if (!hello.ok() || !peer.ok() || peer->uid != getuid()) _exit(3);
    auto region = ShmRegion::Create(*ComputeLayout(hello->sq_entries, hello->cq_entries, 4096));
    auto bell = EventFd::Create();
    if (!region.ok() || !bell.ok()) _exit(4);
    UniqueFd t1 = MemfdWith("slot 0");
    Welcome w{77, 4096, 4096, 1, kMaxBatchKeys, (*region)->layout()};
    const int fds[kWelcomeFdCount] = {t1.get(), (*region)->fd(), bell->fd(), bell->fd()};
    if (!SendFrame(s.b.get(), EncodeWelcome(w), fds).ok()) _exit(5);
    RingConsumer sq((*region)->submission(), nullptr);
    std::byte record[kRecordBytes];
    if (!sq.Pop(record, *bell).ok()) _exit(6);
    absl::StatusOr<Request> req = DecodeRequest(record, (*region)->arena().bytes);
    _exit(req.ok() && req->request_id == 1234 ? 0 : 7);
  }
  Hello hello;
  hello.ns.model_id = "m";
  hello.sq_entries = 8;
  hello.cq_entries = 8;
  ASSERT_TRUE(SendFrame(s.a.get(), *EncodeHello(hello)).ok());
  absl::StatusOr<ReceivedFrame> frame = RecvFrame(s.a.get(), kWelcomeFdCount);
  ASSERT_TRUE(frame.ok()) << frame.status();
  ASSERT_EQ(frame->fds.size(), size_t{kWelcomeFdCount});
  absl::StatusOr<Welcome> welcome = DecodeWelcome(frame->payload);
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  EXPECT_EQ(welcome->session_id, 77u);
  auto region = ShmRegion::Map(std::move(frame->fds[kFdRegion]), welcome->layout);
  ASSERT_TRUE(region.ok()) << region.status();
  EventFd daemon_bell(std::move(frame->fds[kFdDaemonBell]));
  RingProducer sq((*region)->submission(), &daemon_bell);
  std::byte record[kRecordBytes];
  EncodeRequest(Request{Op::kNop, 1234, 0, 0, {}, {}}, record);
  ASSERT_TRUE(*sq.TryPush(record));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(FdPassingTest, TruncatedControlDataIsAnErrorAndLeaksNoFd) {
  SocketPair s;
  std::vector<UniqueFd> memfds;
  std::vector<int> raw;
  for (int i = 0; i < 12; ++i) {  // more than RecvWithFds has room for
    memfds.push_back(MemfdWith("x"));
    raw.push_back(memfds.back().get());
  }
  char cbuf[CMSG_SPACE(sizeof(int) * 12)] = {};
  std::byte byte{1};
  iovec iov{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * 12);
  std::memcpy(CMSG_DATA(c), raw.data(), sizeof(int) * 12);
  ASSERT_EQ(sendmsg(s.a.get(), &msg, 0), 1);
  const size_t before = OpenFds();
  std::byte buf[16];
  std::vector<UniqueFd> fds;
  absl::StatusOr<size_t> n = RecvWithFds(s.b.get(), buf, kMaxFdsPerMessage, &fds);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(n.status().message()).find("MSG_CTRUNC"), std::string::npos);
  EXPECT_TRUE(fds.empty());
  EXPECT_EQ(OpenFds(), before);
}

TEST(FdPassingTest, MoreFdsThanExpectedAreRefusedAndClosed) {
  SocketPair s;
  UniqueFd m1 = MemfdWith("1"), m2 = MemfdWith("2"), m3 = MemfdWith("3");
  const int fds[] = {m1.get(), m2.get(), m3.get()};
  ASSERT_TRUE(SendFrame(s.a.get(), EncodeError({absl::StatusCode::kOk, ""}), fds).ok());
  const size_t before = OpenFds();
  absl::StatusOr<ReceivedFrame> got = RecvFrame(s.b.get(), 2);
  EXPECT_FALSE(got.ok());
  EXPECT_NE(std::string(got.status().message()).find("3 fds received, at most 2"),
            std::string::npos);
  EXPECT_EQ(OpenFds(), before);
}

TEST(FdPassingTest, EndOfStreamBetweenFramesAndInsideOneAreTold) {
  {
    SocketPair s;
    s.a.Reset();
    EXPECT_EQ(RecvFrame(s.b.get(), 0).status().code(), absl::StatusCode::kUnavailable);
  }
  {
    SocketPair s;
    const std::vector<std::byte> frame = EncodeError({absl::StatusCode::kOk, "cut short"});
    ASSERT_EQ(write(s.a.get(), frame.data(), frame.size() - 3),
              static_cast<ssize_t>(frame.size() - 3));
    s.a.Reset();
    EXPECT_EQ(RecvFrame(s.b.get(), 0).status().code(), absl::StatusCode::kDataLoss);
  }
  {
    SocketPair s;
    const char garbage[16] = "GET / HTTP/1.1";
    ASSERT_EQ(write(s.a.get(), garbage, 16), 16);
    absl::StatusOr<ReceivedFrame> got = RecvFrame(s.b.get(), 0);
    EXPECT_NE(std::string(got.status().message()).find("bad magic"), std::string::npos);
  }
}

}  // namespace
}  // namespace kvtier::protocol
