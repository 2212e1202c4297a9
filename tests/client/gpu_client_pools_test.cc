// T0 per memory pool (docs/protocol.md "Trust and isolation") against a real kvtierd with a GPU
// tier and two pools: each pool has its own device allocation and IPC handle, and a client's
// Welcome carries its own pool's only (a child running as pool a's uid gets a's handle, never b's).
// Skips, saying why, without a GPU.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/daemon/kvtierd_test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace kvtier {
namespace {

using testing::KvtierdProcess;

absl::StatusOr<std::unique_ptr<client::Client>> ConnectToPool(const KvtierdProcess& d,
                                                              const std::string& pool) {
  client::ClientOptions options{d.socket_path(), testing::ItNamespace(), "gpu-pools"};
  options.pool = pool;
  return client::Client::Connect(options);
}

TEST(GpuClientPoolsTest, EachPoolHasItsOwnT0AndAClientGetsOnlyItsPools) {
  KVTIER_REQUIRE_GPU();
  testing::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // the child of another uid reaches the socket
  auto d = KvtierdProcess::Start(
      dir.path(), {"--t1.capacity_bytes", "64MiB", "--t1.slot_bytes", "64KiB", "--t1.huge_pages",
                   "off", "--t2.enabled", "false", "--t0.enabled", "true", "--t0.capacity_bytes",
                   "64MiB", "--daemon.socket_mode", "0666", "--pools",
                   "[{name = \"a\", users = [65534], t0_capacity_bytes = \"16MiB\"}, "
                   "{name = \"b\", users = [64711], t0_capacity_bytes = \"32MiB\"}]"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto a = ConnectToPool(**d, "a");
  auto b = ConnectToPool(**d, "b");
  ASSERT_TRUE(a.ok() && b.ok()) << (*d)->Log();
  ASSERT_TRUE((*a)->t0().has_value() && (*b)->t0().has_value()) << (*d)->Log();
  const client::T0Info t0_a = *(*a)->t0();
  const client::T0Info t0_b = *(*b)->t0();
  EXPECT_EQ(t0_a.bytes, uint64_t{16} << 20);
  EXPECT_EQ(t0_b.bytes, uint64_t{32} << 20);
  EXPECT_NE(t0_a.ipc_handle, t0_b.ipc_handle);  // two allocations, two handles
  // A client of uid 65534 (pool a's) gets a's handle; it never sees b's. The child touches no GPU.
  const pid_t child = testing::RunChild([&] {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      return 3;
    }
    auto c = ConnectToPool(**d, "");
    if (!c.ok() || !(*c)->t0().has_value()) return 1;
    return (*c)->t0()->ipc_handle == t0_a.ipc_handle && (*c)->t0()->bytes == t0_a.bytes ? 0 : 2;
  });
  const int status = testing::WaitChild(child);
  ASSERT_TRUE(WIFEXITED(status)) << testing::DescribeWaitStatus(status);
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot switch to uid 65534 here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << (*d)->Log();
  a->reset();
  b->reset();
  EXPECT_TRUE(testing::ExitedZero((*d)->Stop(SIGTERM))) << (*d)->Log();
}

}  // namespace
}  // namespace kvtier
