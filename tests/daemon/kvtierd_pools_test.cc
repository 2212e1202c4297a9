// Memory pools per tenant (DESIGN.md "Trust and isolation", docs/protocol.md): a real kvtierd with
// two pools, and client processes running as real uids (the test runs as root; each child switches
// with setgroups/setresgid/setresuid before it connects). A client of pool a maps a's T1 segment
// and never b's, cannot name b, and sees none of b's blocks even in the same namespace; a's load
// never evicts b's blocks; a uid allowed in no pool is refused with a reason; root, allowed in
// every pool, must name one.
#include <dirent.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "tests/daemon/kvtierd_test_util.h"
#include "tests/daemon/metrics_scrape.h"
#include "tools/stat/stat_view.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using testing::CheckAll;
using testing::CheckFound;
using testing::ItNamespace;
using testing::KvtierdProcess;
using testing::PutRetrying;
using testing::RunChild;
using testing::SeqKeys;
using testing::WaitChild;

constexpr uid_t kUidA = 65534;            // nobody: pool a's user
constexpr uid_t kUidB = 64711;            // no user entry: pool b's user
constexpr uid_t kUidNone = 64712;         // in no pool
constexpr int kCannotSwitch = 99;         // a child's exit code: the uid switch itself failed
constexpr uint64_t kPoolBytes = 1 << 20;  // each pool's T1: 64 slots of 16 KiB

// In a forked child: becomes `uid` (gid the same number, no supplementary groups).
bool BecomeUser(uid_t uid) {
  return ::setgroups(0, nullptr) == 0 && ::setresgid(uid, uid, uid) == 0 &&
         ::setresuid(uid, uid, uid) == 0;
}

// The memfds this process holds or maps, as /proc shows them ("/memfd:kvtier-t1-a (deleted)").
std::string MemfdsOfThisProcess() {
  std::string out;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) {
      char link[512];
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = ::readlink(path.c_str(), link, sizeof(link) - 1);
      if (n > 0) out += std::string(link, static_cast<size_t>(n)) + "\n";
    }
    ::closedir(d);
  }
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return out + text.str();
}

int Fail(int code, const std::string& why) {
  std::fprintf(stderr, "child: %s\n", why.c_str());
  return code;
}

class KvtierdPoolsTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> flags = {}, int metrics_port = 0) {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);  // children of other uids reach the socket
    const std::string pools =
        "[{name = \"a\", users = [\"65534\"], t1_capacity_bytes = \"1MiB\"}, "
        "{name = \"b\", users = [\"64711\"], t1_capacity_bytes = \"1MiB\"}]";
    const std::vector<std::string> base = {
        "--t1.capacity_bytes",  "2MiB", "--t1.slot_bytes", "16KiB", "--t1.dma_chunk_bytes", "1MiB",
        "--t1.touch_threads",   "1",    "--t1.huge_pages", "off",   "--t2.enabled",         "false",
        "--daemon.socket_mode", "0666", "--pools",         pools};
    flags.insert(flags.begin(), base.begin(), base.end());
    auto d = KvtierdProcess::Start(dir_.path(), flags, metrics_port);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  void TearDown() override {
    if (daemon_ == nullptr) return;
    const int status = daemon_->Stop(SIGTERM);
    EXPECT_TRUE(testing::ExitedZero(status))
        << "after SIGTERM: " << testing::DescribeWaitStatus(status) << "\n"
        << daemon_->Log();
  }

  absl::StatusOr<std::unique_ptr<client::Client>> ConnectPool(const std::string& pool,
                                                              const std::string& name = "test") {
    client::ClientOptions options{daemon_->socket_path(), ItNamespace(), name};
    options.pool = pool;
    return client::Client::Connect(options);
  }

  // Runs `body` in a child as `uid`; its exit code, or skips the test when the switch failed.
  int AsUser(uid_t uid, const std::function<int()>& body) {
    const pid_t child = RunChild([&] { return BecomeUser(uid) ? body() : kCannotSwitch; });
    const int status = WaitChild(child);
    if (!WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
};

TEST_F(KvtierdPoolsTest, AClientMapsOnlyItsPoolsSegmentAndCannotNameAnotherPool) {
  StartDaemon();
  const int code = AsUser(kUidA, [&] {
    auto c = ConnectPool("");  // the only pool uid 65534 may use: a
    if (!c.ok()) return Fail(1, c.status().ToString());
    if ((*c)->t1_bytes() != kPoolBytes) return Fail(2, "T1 is not pool a's size");
    std::string memfds = MemfdsOfThisProcess();
    if (memfds.find("memfd:kvtier-t1-a") == std::string::npos) return Fail(3, "no a: " + memfds);
    for (const std::string asked : {"b", "no-such-pool"}) {
      auto other = ConnectPool(asked);
      if (other.ok() || other.status().code() != absl::StatusCode::kPermissionDenied ||
          other.status().message().find("'" + asked + "'") == std::string::npos) {
        return Fail(4, asked + ": " + other.status().ToString());
      }
    }
    if (!ConnectPool("a").ok()) return Fail(5, "naming its own pool failed");
    memfds = MemfdsOfThisProcess();
    if (memfds.find("kvtier-t1-b") != std::string::npos) return Fail(6, "b's segment: " + memfds);
    return 0;
  });
  if (code == kCannotSwitch) GTEST_SKIP() << "cannot switch to uid 65534 here";
  EXPECT_EQ(code, 0) << daemon_->Log();
  EXPECT_NE(daemon_->Log().find("may not use it"), std::string::npos) << daemon_->Log();
}

// The same namespace and the same keys in two pools are two blocks: neither sees the other's.
TEST_F(KvtierdPoolsTest, TheSameNamespaceInAnotherPoolSeesNoneOfItsBlocks) {
  StartDaemon();
  auto b = ConnectPool("b");  // root may use every pool
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<BlockKey> keys = SeqKeys(**b, 1, 8);
  ASSERT_TRUE(PutRetrying(**b, keys).ok());
  const int code = AsUser(kUidA, [&] {
    auto a = ConnectPool("");
    if (!a.ok()) return Fail(1, a.status().ToString());
    auto looked = (*a)->Lookup(keys);
    if (!looked.ok() || looked->hit_blocks != 0) return Fail(2, "a sees b's blocks");
    std::vector<bool> found;
    if (!CheckFound(**a, keys, &found).ok() ||
        std::find(found.begin(), found.end(), true) != found.end()) {
      return Fail(3, "a got one of b's blocks");
    }
    auto put = testing::PutKeys(**a, keys);  // stored anew in a, not "already present"
    if (!put.ok() || *put != std::vector<BlockCode>(keys.size(), BlockCode::kOk)) {
      return Fail(4, "a's put of the same keys was not stored as new blocks");
    }
    return 0;
  });
  if (code == kCannotSwitch) GTEST_SKIP() << "cannot switch to uid 65534 here";
  EXPECT_EQ(code, 0) << daemon_->Log();
  EXPECT_TRUE(CheckAll(**b, keys).ok());
}

TEST_F(KvtierdPoolsTest, OnePoolFilledPastItsCapacityNeverEvictsAnotherPoolsBlocks) {
  StartDaemon();
  constexpr uint32_t kBlocksOfB = 40;  // under b's high watermark (0.95 of 64 slots)
  const int put_b = AsUser(kUidB, [&] {
    auto b = ConnectPool("");
    if (!b.ok()) return Fail(1, b.status().ToString());
    const absl::Status put = PutRetrying(**b, SeqKeys(**b, 7, kBlocksOfB));
    return put.ok() ? 0 : Fail(2, put.ToString());
  });
  if (put_b == kCannotSwitch) GTEST_SKIP() << "cannot switch to uid " << kUidB << " here";
  ASSERT_EQ(put_b, 0) << daemon_->Log();
  const int load_a = AsUser(kUidA, [&] {
    auto a = ConnectPool("");
    if (!a.ok()) return Fail(1, a.status().ToString());
    const std::vector<BlockKey> first = SeqKeys(**a, 100, 16);
    if (!PutRetrying(**a, first).ok()) return Fail(2, "first put");
    for (uint32_t s = 101; s < 141; ++s) {  // 640 more blocks: ten times a's T1
      if (absl::Status put = PutRetrying(**a, SeqKeys(**a, s, 16)); !put.ok()) {
        return Fail(3, put.ToString());
      }
    }
    std::vector<bool> found;
    if (!CheckFound(**a, first, &found).ok() || found[0]) {
      return Fail(4, "a's load evicted nothing of a's: the test would prove nothing");
    }
    return 0;
  });
  ASSERT_EQ(load_a, 0) << daemon_->Log();
  auto b = ConnectPool("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(CheckAll(**b, SeqKeys(**b, 7, kBlocksOfB)).ok()) << daemon_->Log();
  auto stats = (*b)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->t1_slots_total - stats->t1_slots_free, kBlocksOfB);
}

TEST_F(KvtierdPoolsTest, AClientAllowedInNoPoolIsRefusedWithTheReason) {
  StartDaemon();
  const int code = AsUser(kUidNone, [&] {
    auto c = ConnectPool("");
    if (c.ok() || c.status().code() != absl::StatusCode::kPermissionDenied ||
        c.status().message().find("may use no memory pool") == std::string::npos) {
      return Fail(1, c.ok() ? "connected" : c.status().ToString());
    }
    return 0;
  });
  if (code == kCannotSwitch) GTEST_SKIP() << "cannot switch to uid " << kUidNone << " here";
  EXPECT_EQ(code, 0) << daemon_->Log();
  EXPECT_NE(daemon_->Log().find("uid 64712 gid 64712"), std::string::npos) << daemon_->Log();
  EXPECT_TRUE(ConnectPool("a").ok());  // the daemon goes on serving
}

TEST_F(KvtierdPoolsTest, RootMayUseEveryPoolAndMustNameOne) {
  StartDaemon();
  auto unnamed = ConnectPool("");
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unnamed.status().message().find("a, b: name one"), std::string::npos)
      << unnamed.status();
  for (const char* pool : {"a", "b"}) {
    auto c = ConnectPool(pool);
    ASSERT_TRUE(c.ok()) << pool << ": " << c.status();
    EXPECT_EQ((*c)->t1_bytes(), kPoolBytes);
  }
}

// pool.name names the pool of a client allowed in several that names none.
TEST_F(KvtierdPoolsTest, PoolNameIsThePoolOfAClientThatNamesNone) {
  StartDaemon({"--pool.name", "b"});
  auto c = ConnectPool("");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<BlockKey> keys = SeqKeys(**c, 3, 2);
  ASSERT_TRUE(PutRetrying(**c, keys).ok());
  auto b = ConnectPool("b");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(CheckAll(**b, keys).ok());
}

// T2 is partitioned: each pool writes its own directory (<t2 dir>/<pool>) and finds its blocks
// there after a restart; the other pool never does.
TEST_F(KvtierdPoolsTest, EachPoolKeepsItsOwnT2AcrossARestart) {
  const std::vector<std::string> t2 = {"--t2.enabled", "true", "--t2.capacity_bytes", "4MiB"};
  StartDaemon(t2);
  std::vector<BlockKey> keys;
  {
    auto b = ConnectPool("b");
    ASSERT_TRUE(b.ok()) << b.status();
    keys = SeqKeys(**b, 9, 6);
    ASSERT_TRUE(PutRetrying(**b, keys).ok());
  }
  const int status = daemon_->Stop(SIGTERM);  // daemon.flush_on_stop writes T1 to T2
  ASSERT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
  for (const char* pool : {"a", "b"}) {
    EXPECT_TRUE(std::filesystem::is_directory(dir_.path() + "/data/t2/" + pool)) << pool;
  }
  StartDaemon(t2);
  auto b = ConnectPool("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(CheckAll(**b, keys).ok()) << daemon_->Log();
  auto a = ConnectPool("a");
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<bool> found;
  ASSERT_TRUE(CheckFound(**a, keys, &found).ok());
  EXPECT_EQ(found, std::vector<bool>(keys.size(), false));
}

// A client of protocol version 4 (a Hello of six text fields, no pool) is refused with the version
// Error, as every other version is, naming both versions.
TEST_F(KvtierdPoolsTest, AVersion4HelloGetsTheVersionError) {
  StartDaemon();
  std::vector<std::byte> frame = *protocol::EncodeHello(protocol::Hello{ItNamespace(), "v4"});
  frame.resize(frame.size() - 2);  // without the empty pool field version 5 added
  protocol::FrameHeader header;
  std::memcpy(&header, frame.data(), sizeof(header));
  header.version = 4;
  header.payload_bytes -= 2;
  std::memcpy(frame.data(), &header, sizeof(header));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, daemon_->socket_path().c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_TRUE(protocol::SendFrame(fd, frame).ok());
  absl::StatusOr<protocol::ReceivedFrame> answer =
      protocol::RecvFrame(fd, 0, std::chrono::steady_clock::now() + std::chrono::seconds(60));
  ::close(fd);
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->info.type, protocol::FrameType::kError);
  absl::StatusOr<protocol::ErrorFrame> error = protocol::DecodeError(answer->payload);
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->code, absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(error->message.find("protocol version 4 (this side speaks 5)"), std::string::npos)
      << error->message;
}

// Each pool's tiers are on the metrics page under its own pool label.
TEST_F(KvtierdPoolsTest, TierMetricsCarryThePoolLabel) {
  const int port = testing::PickFreePort();
  StartDaemon({}, port);
  auto b = ConnectPool("b");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(PutRetrying(**b, SeqKeys(**b, 5, 3)).ok());
  auto a = ConnectPool("a");
  ASSERT_TRUE(a.ok());
  auto page = testing::HttpGet(port);
  ASSERT_TRUE(page.ok()) << page.status();
  // The request-path families too: a series per pool.
  for (const char* pool : {"a", "b"}) {
    const std::string clients = "kvtier_connected_clients{pool=\"" + std::string(pool) + "\"} 1";
    EXPECT_NE(page->find(clients), std::string::npos) << clients << "\n" << *page;
  }
  const testing::MetricsPage sample(*page);
  EXPECT_GT(sample.Value("kvtier_moved_bytes_total{direction=\"client_to_t1\",pool=\"b\"}"), 0);
  EXPECT_EQ(sample.Value("kvtier_moved_bytes_total{direction=\"client_to_t1\",pool=\"a\"}"), 0);
  const std::string capacity = std::to_string(kPoolBytes);
  for (const char* pool : {"a", "b"}) {
    const std::string line =
        "kvtier_tier_capacity_bytes{pool=\"" + std::string(pool) + "\",tier=\"T1\"} " + capacity;
    EXPECT_NE(page->find(line), std::string::npos) << line << "\n" << *page;
  }
  const std::string used_b =
      "kvtier_tier_used_bytes{pool=\"b\",tier=\"T1\"} " + std::to_string(3 * testing::kItSlotBytes);
  EXPECT_NE(page->find(used_b), std::string::npos) << *page;
  EXPECT_NE(page->find("kvtier_tier_used_bytes{pool=\"a\",tier=\"T1\"} 0"), std::string::npos);
  // `kvtier stat` shows a row per pool.
  stat::StatInput in;
  in.source = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  in.now = stat::MetricsSample(*page);
  const std::string screen = stat::FormatStatScreen(in);
  EXPECT_NE(screen.find("pool "), std::string::npos) << screen;
  for (const char* row : {"a                T1", "b                T1"}) {
    EXPECT_NE(screen.find(row), std::string::npos) << row << "\n" << screen;
  }
}

}  // namespace
}  // namespace kvtier
