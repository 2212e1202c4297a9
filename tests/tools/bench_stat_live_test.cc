// `kvtier bench` and `kvtier stat` against a real kvtierd with small tiers: the bench's report
// has a row per op it ran with percentiles and the socket ceiling; stat's screen has the tiers,
// hit ratios, rates and the Stats op; an unreachable daemon is an error naming its address.
// (Only fields are checked; no timing is asserted.)
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "fmt/format.h"

namespace kvtier {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// A port nothing listens on right now (the kernel's pick for a socket we close again).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Ran {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

Ran RunKvtier(const std::string& args) {
  const std::string command = fmt::format("'{}/tools/kvtier' {} 2>&1", KVTIER_BINARY_DIR, args);
  Ran ran;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) ran.out.append(buf, n);
  const int status = ::pclose(pipe);
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

// kvtierd with a 16 MiB T1 of 64 KiB slots, no T2, metrics on a free port, in a fresh directory.
class LiveDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/kvbench-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/kvtierd.sock";
    metrics_ = fmt::format("127.0.0.1:{}", FreePort());
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string binary = std::string(KVTIER_BINARY_DIR) + "/daemon/kvtierd";
      ::execl(binary.c_str(), "kvtierd", "--daemon.data_directory", dir_.c_str(),
              "--t1.capacity_bytes", "16MiB", "--t1.slot_bytes", "64KiB", "--t2.enabled", "false",
              "--metrics.listen_address", metrics_.c_str(), "--daemon.log_level", "warn",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Ready when the socket exists and stat can read the metrics (start-up waits, not timing).
    for (int i = 0; i < 600; ++i) {
      if (std::filesystem::exists(socket_) &&
          RunKvtier("stat --interval 0 --metrics " + metrics_).exit_code == 0) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "kvtierd did not come up";
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_, socket_, metrics_;
  pid_t pid_ = -1;
};

TEST_F(LiveDaemonTest, BenchReportsEveryOpItRanAndStatShowsTheLoad) {
  const Ran bench = RunKvtier(fmt::format(
      "bench --socket {} --op mixed --keys 4 --dist zipf --sequences 40 --ops 60 -p 2 -t 2 "
      "--payload-bytes 4096 --compare-socket",
      socket_));
  ASSERT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_THAT(bench.out, HasSubstr("op mixed, 4 keys/op, zipf skew 0.99 over 40 sequences"));
  EXPECT_THAT(bench.out, HasSubstr("2 process(es) x 2 thread(s), payload 4096 B"));
  EXPECT_THAT(bench.out, HasSubstr("p50_us   p90_us   p99_us  p999_us"));
  EXPECT_THAT(bench.out, ContainsRegex("\nlookup +240 "));  // 60 ops x 4 workers
  EXPECT_THAT(bench.out, HasSubstr("\nget "));              // zipf repeats: some lookups hit
  EXPECT_THAT(bench.out, HasSubstr("\nput "));
  EXPECT_THAT(bench.out, HasSubstr("ceiling unix-socket round trip (128 B out, 68 B back"));

  const Ran stat = RunKvtier(
      fmt::format("stat --once --interval 0.2 --metrics {} --socket {}", metrics_, socket_));
  ASSERT_EQ(stat.exit_code, 0) << stat.out;
  EXPECT_THAT(stat.out, HasSubstr("at http://" + metrics_ + "/metrics"));
  EXPECT_THAT(stat.out, HasSubstr("rates over"));
  EXPECT_THAT(stat.out, ContainsRegex("T1 +16.0 MiB"));
  EXPECT_THAT(stat.out, HasSubstr("hit ratio (blocks)"));
  EXPECT_THAT(stat.out, ContainsRegex("lookups +240 "));
  EXPECT_THAT(stat.out, HasSubstr("put blocks stored"));
  EXPECT_THAT(stat.out, HasSubstr("client_to_t1"));
  EXPECT_THAT(stat.out, HasSubstr("socket " + socket_ + ": lookups 240"));
}

TEST_F(LiveDaemonTest, BenchGetAfterFillFindsEveryBlock) {
  const Ran bench = RunKvtier(fmt::format(
      "bench --socket {} --op get --fill --keys 8 --sequences 16 --ops 20 --payload-bytes 65536",
      socket_));
  ASSERT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_THAT(bench.out, ContainsRegex("\nget +20 .* 100.0 "));  // every key found
}

TEST(LiveToolsTest, UnreachableDaemonIsAnErrorNamingTheAddress) {
  const std::string port = fmt::format("127.0.0.1:{}", FreePort());
  Ran stat = RunKvtier("stat --once --metrics " + port);
  EXPECT_EQ(stat.exit_code, 1);
  EXPECT_THAT(stat.out, HasSubstr("cannot reach kvtierd's metrics at http://" + port + "/metrics"));
  Ran bench = RunKvtier("bench --socket /nonexistent/kvtierd.sock --ops 1");
  EXPECT_EQ(bench.exit_code, 1);
  EXPECT_THAT(bench.out, HasSubstr("/nonexistent/kvtierd.sock"));
  Ran usage = RunKvtier("bench --keys 0");
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.out, HasSubstr("--keys 0"));
}

}  // namespace
}  // namespace kvtier
