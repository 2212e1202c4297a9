// A real kvtierd against a hostile or unlucky user on the same machine (issue 11, "Denial of
// service from the local machine"):
//
//  * out of file descriptors, the accept loop waits and retries (accept_backoff.h) instead of
//    spinning and flooding the log, and serves the queued client once descriptors come back;
//  * idle or slow TCP connections to the metrics port do not keep a scrape from being answered;
//  * a Hello asking for more ring entries or arena than daemon.max_* allow, or arriving while
//    daemon.max_connections clients are connected, is refused with an error naming the limit;
//  * control bytes in a client's model_id or client_name never start a log line of their own.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_split.h"
#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "tests/daemon/kvtierd_test_util.h"
#include "tests/daemon/metrics_scrape.h"

namespace kvtier {
namespace {

using protocol::UniqueFd;
using testing::ItNamespace;
using testing::KvtierdProcess;

const std::vector<std::string> kSmallTiers = {
    "--t1.capacity_bytes", "4MiB", "--t1.slot_bytes", "16KiB", "--t1.dma_chunk_bytes", "1MiB",
    "--t1.touch_threads",  "1",    "--t1.huge_pages", "off",   "--t2.capacity_bytes",  "4MiB"};

std::vector<std::string> With(std::vector<std::string> more) {
  std::vector<std::string> flags = kSmallTiers;
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

UniqueFd UnixConnect(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval guard{60, 0};  // a hang guard: a daemon that never answers fails the test
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
  return fd;
}

UniqueFd TcpConnect(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// The CPU time (user + system) the process has used so far, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command (which may hold spaces) start after the last ')': state is field 3,
  // utime and stime fields 14 and 15.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The lowest descriptor number the process does not use: with RLIMIT_NOFILE there, it can open
// no more.
int LowestFreeFd(pid_t pid) {
  std::set<int> used;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    used.insert(std::stoi(e.path().filename().string()));
  }
  int fd = 0;
  while (used.count(fd) != 0) ++fd;
  return fd;
}

// Lines of the log `text` that contain `needle`.
size_t CountLines(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) ++n;
  }
  return n;
}

class KvtierdDosTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::string>& flags, int* metrics_port = nullptr) {
    auto d = metrics_port == nullptr ? KvtierdProcess::Start(dir_.path(), flags)
                                     : testing::StartWithMetrics(dir_.path(), flags, metrics_port);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // The daemon stops cleanly on SIGTERM whatever the test did to it.
  void TearDown() override {
    if (daemon_ == nullptr) return;
    const int status = daemon_->Stop(SIGTERM);
    EXPECT_TRUE(testing::ExitedZero(status))
        << "after SIGTERM: " << testing::DescribeWaitStatus(status) << "\n"
        << daemon_->Log();
  }

  // A client named `name` asking for these rings and arena (0: the daemon's defaults).
  absl::StatusOr<std::unique_ptr<client::Client>> Connect(const std::string& name, uint32_t sq = 0,
                                                          uint32_t cq = 0, uint32_t arena = 0,
                                                          const Namespace& ns = ItNamespace()) {
    client::ClientOptions options;
    options.socket_path = daemon_->socket_path();
    options.ns = ns;
    options.client_name = name;
    options.sq_entries = sq;
    options.cq_entries = cq;
    options.arena_bytes = arena;
    return client::Client::Connect(options);
  }

  // A client connects, stores and reads back a block: the daemon serves.
  void ExpectServes(const std::string& what) {
    auto c = Connect("check");
    ASSERT_TRUE(c.ok()) << what << ": " << c.status() << "\n" << daemon_->Log();
    const std::vector<BlockKey> keys = testing::SeqKeys(**c, 7, 2);
    EXPECT_TRUE(testing::PutRetrying(**c, keys).ok()) << what;
    EXPECT_TRUE(testing::CheckAll(**c, keys).ok()) << what;
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
};

TEST_F(KvtierdDosTest, OutOfDescriptorsTheAcceptLoopWaitsLogsLittleAndRecovers) {
  Start(kSmallTiers);
  const pid_t pid = daemon_->pid();
  rlimit before{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &before), 0);
  // The soft limit at the lowest free descriptor: the daemon can open none (every accept fails
  // with EMFILE). Set it again until no descriptor came or went meanwhile.
  for (int tries = 0; tries < 10; ++tries) {
    const rlimit full{static_cast<rlim_t>(LowestFreeFd(pid)), before.rlim_max};
    ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &full, nullptr), 0);
    if (static_cast<rlim_t>(LowestFreeFd(pid)) == full.rlim_cur) break;
  }
  // A client whose connection waits in the listen queue: every accept of it fails.
  UniqueFd queued = UnixConnect(daemon_->socket_path());
  ASSERT_TRUE(testing::Eventually([&] {
    return absl::StrContains(daemon_->Log(), "accept failed");
  })) << daemon_->Log();
  const size_t log_before = daemon_->Log().size();
  const double cpu_before = CpuSeconds(pid);
  const auto window = std::chrono::seconds(3);
  std::this_thread::sleep_for(window);  // the measurement window, not a wait for a state
  const double cpu = CpuSeconds(pid) - cpu_before;
  const std::string log = daemon_->Log();
  // A spinning loop used a whole CPU (3 s here) and wrote ~70 MB/s; waiting 10-100 ms between
  // tries costs a few ms, and one line per 10 s.
  EXPECT_LT(cpu, 0.3) << "CPU seconds in " << window.count() << " s out of descriptors";
  EXPECT_LT(log.size() - log_before, 1024u) << log.substr(log_before, 4096);
  EXPECT_LE(CountLines(log, "accept failed"), 2u) << log.substr(0, 8192);
  EXPECT_TRUE(absl::StrContains(log, "Too many open files")) << log.substr(0, 8192);

  // Descriptors come back: the queued client is served without anyone waking the daemon.
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &before, nullptr), 0);
  ASSERT_TRUE(protocol::SendFrame(queued.get(),
                                  *protocol::EncodeHello(protocol::Hello{ItNamespace(), "queued"}))
                  .ok());
  auto welcome = protocol::RecvFrame(queued.get(), protocol::kWelcomeFdCount);
  ASSERT_TRUE(welcome.ok()) << welcome.status() << "\n" << daemon_->Log();
  EXPECT_EQ(welcome->info.type, protocol::FrameType::kWelcome);
  EXPECT_TRUE(absl::StrContains(daemon_->Log(), "accepting again after")) << daemon_->Log();
  ExpectServes("after descriptors came back");
}

// civetweb's defaults (2 threads, 30 s to send a request) let two idle connections hold every
// thread past a scrape's timeout. With the defaults now (8 threads, 2 s) eight idle connections
// delay a scrape by at most one request timeout.
TEST_F(KvtierdDosTest, IdleMetricsConnectionsDoNotBlockAScrape) {
  int port = 0;
  Start(kSmallTiers, &port);
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(TcpConnect(port));
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> page = testing::HttpGet(port);  // gives up after 5 s
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(page.ok()) << page.status() << " after " << took.count() << " s\n" << daemon_->Log();
  EXPECT_TRUE(absl::StrContains(*page, "kvtier_connected_clients"));
  EXPECT_LT(took.count(), 4.5);  // one request timeout (2 s) and a loaded machine
}

// Few threads and a short timeout: idle and slow connections (a request that never ends) are
// closed after the timeout, so the scrape behind them is answered.
TEST_F(KvtierdDosTest, SlowMetricsConnectionsAreClosedAfterTheRequestTimeout) {
  int port = 0;
  Start(With({"--metrics.threads", "2", "--metrics.request_timeout_ms", "300"}), &port);
  std::vector<UniqueFd> peers;
  for (int i = 0; i < 8; ++i) {
    peers.push_back(TcpConnect(port));
    if (i % 2 == 0) {
      const std::string part = "GET /metr";  // and then nothing more
      ASSERT_EQ(::send(peers.back().get(), part.data(), part.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(part.size()));
    }
  }
  absl::StatusOr<std::string> page = testing::HttpGet(port);  // gives up after 5 s
  ASSERT_TRUE(page.ok()) << page.status() << "\n" << daemon_->Log();
  EXPECT_TRUE(absl::StrContains(*page, "kvtier_connected_clients"));
}

TEST_F(KvtierdDosTest, AHelloAskingMoreThanTheLimitsIsRefusedNamingThem) {
  Start(With({"--daemon.max_ring_entries", "1024", "--daemon.max_arena_bytes", "4MiB"}));
  auto arena = Connect("greedy", 0, 0, 1u << 30);
  ASSERT_FALSE(arena.ok());
  EXPECT_EQ(arena.status().code(), absl::StatusCode::kResourceExhausted) << arena.status();
  EXPECT_TRUE(absl::StrContains(arena.status().message(), "daemon.max_arena_bytes"))
      << arena.status();
  EXPECT_TRUE(absl::StrContains(arena.status().message(), "1073741824")) << arena.status();
  for (const auto& [sq, cq] : {std::pair{65536u, 0u}, std::pair{0u, 2048u}}) {
    auto rings = Connect("greedy", sq, cq);
    ASSERT_FALSE(rings.ok());
    EXPECT_EQ(rings.status().code(), absl::StatusCode::kResourceExhausted) << rings.status();
    EXPECT_TRUE(absl::StrContains(rings.status().message(), "daemon.max_ring_entries"))
        << rings.status();
  }
  const std::string log = daemon_->Log();
  EXPECT_EQ(CountLines(log, "'greedy'"), 3u) << log;
  EXPECT_EQ(CountLines(log, "daemon.max_arena_bytes"), 1u) << log;
  // At the limits is fine, and so is the default.
  auto most = Connect("most", 1024, 1024, 4u << 20);
  ASSERT_TRUE(most.ok()) << most.status();
  ExpectServes("beside a client at the limits");
}

TEST_F(KvtierdDosTest, AConnectionBeyondMaxConnectionsIsRefusedUntilOneCloses) {
  Start(With({"--daemon.max_connections", "2"}));
  auto first = Connect("first");
  auto second = Connect("second");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  auto third = Connect("third");
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_TRUE(absl::StrContains(third.status().message(), "daemon.max_connections"))
      << third.status();
  EXPECT_EQ(CountLines(daemon_->Log(), "daemon.max_connections"), 1u) << daemon_->Log();
  // Those connected are still served.
  const std::vector<BlockKey> keys = testing::SeqKeys(**first, 3, 2);
  EXPECT_TRUE(testing::PutRetrying(**first, keys).ok());
  EXPECT_TRUE(testing::CheckAll(**second, keys).ok());
  first->reset();  // its close reaches the daemon's loop in its own time
  ASSERT_TRUE(testing::Eventually([&] { return Connect("later").ok(); })) << daemon_->Log();
}

TEST_F(KvtierdDosTest, ControlBytesInClientStringsNeverStartALogLine) {
  Start(With({"--daemon.max_arena_bytes", "2MiB"}));
  const std::string forged = "2026-01-01T00:00:00.000000Z error [fake] forged";
  Namespace ns = ItNamespace();
  ns.model_id = "model\n" + forged + "\r\n";
  auto c = Connect("name\n" + forged, 0, 0, 0, ns);
  ASSERT_TRUE(c.ok()) << c.status();
  // A refused Hello logs the same strings on another path.
  auto refused = Connect("refused\n" + forged, 0, 0, 4u << 20, ns);
  ASSERT_FALSE(refused.ok());
  c->reset();
  ASSERT_TRUE(testing::Eventually([&] { return absl::StrContains(daemon_->Log(), "closed"); }));
  const std::string log = daemon_->Log();
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    EXPECT_FALSE(absl::StartsWith(line, forged)) << "a client wrote a log line:\n" << log;
    EXPECT_FALSE(absl::StrContains(line, "\r")) << log;
  }
  EXPECT_TRUE(absl::StrContains(log, "model\\x0a" + forged + "\\x0d\\x0a")) << log;
  EXPECT_TRUE(absl::StrContains(log, "'name\\x0a" + forged + "'")) << log;
  EXPECT_TRUE(absl::StrContains(log, "'refused\\x0a" + forged + "'")) << log;
}

}  // namespace
}  // namespace kvtier
