// Client::Connect against a daemon that is stopped but still holds its socket: the handshake has
// the same deadline as a request (ClientOptions::timeout_ms) instead of blocking forever (issue
// 11). Real listening Unix sockets stand in for the stopped daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "client/kvtier_client.h"
#include "client/protocol/unique_fd.h"
#include "tests/daemon/config_test_util.h"

namespace kvtier {
namespace {

using protocol::UniqueFd;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr int kTimeoutMs = 300;
// Far above kTimeoutMs, far below a hang: a loaded CI machine is slow, not wrong.
constexpr auto kGuard = std::chrono::seconds(20);

sockaddr_un AddressOf(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return addr;
}

// A Unix socket at `path` that listens with `backlog` and never accepts or answers.
UniqueFd Listen(const std::string& path, int backlog) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_un addr = AddressOf(path);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::listen(fd.get(), backlog), 0);
  return fd;
}

client::ClientOptions Options(const std::string& path) {
  client::ClientOptions o;
  o.socket_path = path;
  o.ns.model_id = "deadline-model";
  o.timeout_ms = kTimeoutMs;
  return o;
}

// connect() succeeds (the kernel queues it), Hello is sent, and no Welcome ever comes.
TEST(ClientConnectDeadline, AListenerThatNeverAnswersTimesOut) {
  testing::TempDir tmp;
  const std::string path = tmp.path() + "/silent.sock";
  UniqueFd listener = Listen(path, 16);
  const auto start = Clock::now();
  auto c = client::Client::Connect(Options(path));
  const auto took = Clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr(path));
  EXPECT_THAT(c.status().message(), HasSubstr("timeout_ms = 300"));
  EXPECT_GE(took, std::chrono::milliseconds(kTimeoutMs));
  EXPECT_LT(took, kGuard);
}

// The listen queue is full (a stopped daemon under a connect storm): connect() itself would wait
// for room for ever.
TEST(ClientConnectDeadline, AFullListenQueueTimesOut) {
  testing::TempDir tmp;
  const std::string path = tmp.path() + "/full.sock";
  UniqueFd listener = Listen(path, 0);
  // Backlog 0 still queues one connection; these fill the queue (non-blocking, so the test never
  // waits here itself).
  std::vector<UniqueFd> fillers;
  const sockaddr_un addr = AddressOf(path);
  for (int i = 0; i < 4; ++i) {
    UniqueFd f(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (::connect(f.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) break;
    fillers.push_back(std::move(f));
  }
  ASSERT_FALSE(fillers.empty());
  const auto start = Clock::now();
  auto c = client::Client::Connect(Options(path));
  const auto took = Clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr(path));
  EXPECT_LT(took, kGuard);
}

TEST(ClientConnectDeadline, ATimeoutMustBePositive) {
  client::ClientOptions o = Options("/nonexistent/kvtierd.sock");
  o.timeout_ms = 0;
  auto c = client::Client::Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("timeout_ms is 0"));
}

}  // namespace
}  // namespace kvtier
