// The config's outputs agree with its inputs: every key round-trips through --print-config, and
// the checked-in configs/default.toml and docs/configuration.md are what the key table prints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/config.h"
#include "daemon/config_schema.h"
#include "tests/daemon/config_test_util.h"

namespace kvtier {
namespace {

using testing::ReadFile;
using testing::TempDir;

// Every key set to something other than its default.
constexpr const char* kEveryKey = R"([daemon]
data_directory = "/var/lib/kvtier"
socket_path = "/run/kvtier/kvtierd.sock"
socket_mode = "0600"
allowed_users = ["root", 1001]
allowed_groups = [0]
log_level = "debug"
log_file = "/var/log/kvtierd.log"
record_file = "lookups.jsonl"
flush_on_stop = false
flush_on_stop_seconds = 5
verify_puts = true
spin_us = 7
spin_threads = 3
verify_threads = 2
max_connections = 16
max_ring_entries = 1024
max_arena_bytes = "8MiB"
max_working_slots = 64
key_scope_file = "/etc/kvtier/fleet.secret"
[metrics]
enabled = false
listen_address = "[::1]:9100"
threads = 4
request_timeout_ms = 500
[pool]
name = "tenant-a"
[index]
num_shards = 128
expected_entries = 1000
max_entries = 4096
[t0]
enabled = true
write_through = false
device = 1
capacity_bytes = "16GiB"
free_fraction = 0.25
high_watermark = 0.85
low_watermark = 0.7
leaf_first = true
eviction.policy = "s3fifo"
eviction.s3fifo_small_fraction = 0.3
admission.policy = "second"
admission.window_blocks = 500
[t1]
capacity_bytes = "8GiB"
slot_bytes = "1MiB"
numa_pci_bus_id = "0000:3b:00.0"
touch_threads = 8
huge_pages = "off"
dma_chunk_bytes = "512MiB"
first_ready_bytes = "32MiB"
high_watermark = 0.9
low_watermark = 0.8
leaf_first = true
eviction.policy = "s3fifo"
eviction.s3fifo_small_fraction = 0.2
admission.policy = "all"
admission.window_blocks = 1000
[t2]
enabled = false
directories = ["/mnt/nvme0", "/mnt/nvme1"]
capacity_bytes = "100GiB"
queue_depth = 128
verify_threads = 3
admission_probe_interval_ms = 1000
durability = "none"
metadata_directory = "/mnt/nvme0/meta"
preallocate = false
max_demotions_in_flight = 16
high_watermark = 0.99
low_watermark = 0.5
leaf_first = true
[t2.eviction]
policy = "arc"
s3fifo_small_fraction = 0.3
[t2.admission]
policy = "second"
window_blocks = 5000
[remote]
enabled = true
nodes = ["10.0.0.1:6379", "10.0.0.2:6379"]
cluster = true
user = "kvtier"
password_file = "@PASSWORD_FILE@"
connect_timeout_ms = 500
command_timeout_ms = 700
pool_per_node = 8
max_pipeline = 32
reconnect_backoff_min_ms = 50
reconnect_backoff_max_ms = 900
breaker_failures = 3
breaker_open_ms = 300
breaker_open_max_ms = 9000
verify_puts = true
key_prefix = "fleet-a:"
capacity_bytes = "64GiB"
threads = 8
lookup_budget_us = 900
lookup_max_blocks = 128
high_watermark = 0.8
low_watermark = 0.6
leaf_first = true
[remote.eviction]
policy = "fifo"
s3fifo_small_fraction = 0.25
[remote.admission]
policy = "second"
window_blocks = 700
[[pools]]
name = "tenant-a"
users = [1002]
groups = ["1003"]
t1_capacity_bytes = "2GiB"
numa_pci_bus_id = "0000:5e:00.0"
t1_high_watermark = 0.85
t1_low_watermark = 0.75
t0_capacity_bytes = "4GiB"
t2_capacity_bytes = "10GiB"
[[pools]]
name = "tenant-b"
users = ["1004"]
)";

// kEveryKey with its password file written into `dir`.
std::string EveryKeyIn(const TempDir& dir) {
  std::string text = kEveryKey;
  const std::string marker = "@PASSWORD_FILE@";
  text.replace(text.find(marker), marker.size(), dir.Write("password", "secret\n"));
  return text;
}

TEST(ConfigFilesTest, EveryKeyRoundTripsThroughPrintConfig) {
  TempDir dir;
  absl::StatusOr<DaemonConfig> loaded = LoadConfig(dir.Write("every.toml", EveryKeyIn(dir)), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const DaemonConfig defaults;
  for (const ConfigKey& key : ConfigKeys()) {
    if (key.name == "t1.admission.policy") continue;  // one choice only: "all", the default
    // Not together with remote.password_file (which kEveryKey sets); RemotePasswordIsAKey below.
    if (key.name == "remote.password") continue;
    EXPECT_NE(key.get(*loaded), key.get(defaults)) << key.name << " is not covered by kEveryKey";
  }
  const std::string printed = PrintConfig(*loaded);
  absl::StatusOr<DaemonConfig> again = LoadConfig(dir.Write("printed.toml", printed), {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(PrintConfig(*again), printed);
  EXPECT_EQ(again->daemon.allowed_uids, (std::vector<uid_t>{0, 1001}));
  EXPECT_EQ(again->tiers.t1.huge_pages, HugePages::kOff);
  EXPECT_EQ(again->tiers.t2->durability, T2Durability::kNone);
  EXPECT_EQ(again->tiers.max_demotions_in_flight, 16u);
  EXPECT_EQ(again->daemon.socket_mode, 0600u);
  EXPECT_EQ(again->daemon.log_level, log::Level::kDebug);
}

TEST(ConfigFilesTest, RemotePasswordIsAKey) {
  TempDir dir;
  absl::StatusOr<DaemonConfig> loaded = LoadConfig(
      dir.Write("remote.toml", "[remote]\nenabled = true\nnodes = [\"h:1\"]\npassword = \"pw\"\n"),
      {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->remote.store.password, "pw");
}

TEST(ConfigFilesTest, BadRemoteKeysAreEachNamedWithTheirPlace) {
  TempDir dir;
  const std::string path =
      dir.Write("remote.toml",
                "[remote]\nenabled = true\nnodes = [\"nohost\"]\ncapacity_bytes = \"1000\"\n"
                "threads = 0\ncluster = \"maybe\"\n");
  const absl::Status s = LoadConfig(path, {}).status();
  ASSERT_FALSE(s.ok());
  const std::string m(s.message());
  EXPECT_NE(m.find("remote.nodes[0]"), std::string::npos) << m;
  EXPECT_NE(m.find("remote.capacity_bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("remote.threads: 0 is not in [1, 256]"), std::string::npos) << m;
  EXPECT_NE(m.find(path + ":6: remote.cluster: 'maybe'"), std::string::npos) << m;
}

TEST(ConfigFilesTest, DefaultTomlIsWhatPrintConfigPrintsForTheDefaults) {
  const std::string path = KVTIER_SOURCE_DIR "/configs/default.toml";
  EXPECT_EQ(ReadFile(path), PrintConfig(DaemonConfig{}))
      << "regenerate: build/default/daemon/kvtierd --print-config > configs/default.toml";
  absl::StatusOr<DaemonConfig> loaded = LoadConfig(path, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(PrintConfig(*loaded), PrintConfig(DaemonConfig{}));
}

TEST(ConfigFilesTest, SystemConfigLoads) {
  absl::StatusOr<DaemonConfig> loaded = LoadConfig(KVTIER_SOURCE_DIR "/configs/kvtierd.toml", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->daemon.socket_path, "/run/kvtier/kvtierd.sock");
  EXPECT_EQ(loaded->daemon.data_directory, "/var/lib/kvtier");
  EXPECT_EQ(loaded->ManagerOptions().t2->directories,
            (std::vector<std::string>{"/var/lib/kvtier/t2"}));
}

TEST(ConfigFilesTest, ConfigurationDocListsEveryKeyAsTheTablePrintsIt) {
  const std::string doc = ReadFile(KVTIER_SOURCE_DIR "/docs/configuration.md");
  const std::string begin = "<!-- BEGIN kvtierd --help-config-markdown -->\n";
  const std::string end = "<!-- END kvtierd --help-config-markdown -->";
  const size_t b = doc.find(begin);
  const size_t e = doc.find(end);
  ASSERT_TRUE(b != doc.npos && e != doc.npos && b < e);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), ConfigMarkdown())
      << "regenerate the part between the markers with kvtierd --help-config-markdown";
}

}  // namespace
}  // namespace kvtier
