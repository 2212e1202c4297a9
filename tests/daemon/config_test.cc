// Loading kvtierd's config as an operator meets it: the defaults load, and every mistake is an
// error that names the file, the line and the key (DESIGN.md "Reliability rules").
#include "daemon/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "absl/strings/str_split.h"
#include "tests/daemon/config_test_util.h"

namespace kvtier {
namespace {

using ::testing::HasSubstr;
using testing::LoadError;
using ::testing::StartsWith;
using testing::TempDir;

TEST(ConfigTest, DefaultsLoadAndPassTheTiersOwnChecks) {
  absl::StatusOr<DaemonConfig> config = LoadConfig("", {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(ValidateConfig(DaemonConfig{}).ok());
  const TierManagerOptions o = config->ManagerOptions();
  EXPECT_TRUE(o.t1.Validate().ok());
  EXPECT_TRUE(o.t1_policy.eviction.Validate().ok());
  ASSERT_TRUE(o.t2.has_value());
  EXPECT_EQ(o.t2->slot_bytes, o.t1.slot_bytes);
  EXPECT_EQ(o.t1.capacity_bytes, uint64_t{1} << 30);
  EXPECT_EQ(config->metrics.listen_address, "127.0.0.1:9464");
}

TEST(ConfigTest, UnknownKeyIsNamedWithItsLineAndTheKnownKeys) {
  TempDir dir;
  const std::string error = LoadError(dir, "[t1]\nslot_bytes = \"2MiB\"\ncapacity = \"8GiB\"\n");
  EXPECT_THAT(error, HasSubstr("x.toml:3: t1.capacity: unknown key in [t1] (known: capacity_bytes, "
                               "slot_bytes,"));
  EXPECT_THAT(
      LoadError(dir, "verbose = true\n"),
      HasSubstr("x.toml:1: verbose: unknown key (sections: daemon, metrics, pool, index, t1, t2)"));
}

TEST(ConfigTest, QuotedKeysWithDotsAreNotTakenForSectionAndKey) {
  TempDir dir;
  EXPECT_THAT(LoadError(dir, "\"t1.capacity_bytes\" = \"2GiB\"\n"),
              HasSubstr("x.toml:1: \"t1.capacity_bytes\": a quoted key with a dot"));
}

TEST(ConfigTest, SocketAndT2DirectoryFollowTheDataDirectory) {
  absl::StatusOr<DaemonConfig> config =
      LoadConfig("", {{"daemon.data_directory", "/srv/kv", "--daemon.data_directory"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->SocketPath(), "/srv/kv/kvtierd.sock");
  EXPECT_EQ(config->ManagerOptions().t2->directories, (std::vector<std::string>{"/srv/kv/t2"}));
  config = LoadConfig("", {{"daemon.socket_path", "/run/k.sock", "--daemon.socket_path"},
                           {"t2.directories", "/mnt/a", "--t2.directories"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->SocketPath(), "/run/k.sock");
  EXPECT_EQ(config->ManagerOptions().t2->directories, (std::vector<std::string>{"/mnt/a"}));
}

TEST(ConfigTest, UnknownSectionIsNamedEvenWhenEmpty) {
  TempDir dir;
  EXPECT_THAT(LoadError(dir, "[daemon]\n[t3]\n"), HasSubstr("x.toml:2: [t3]: unknown section"));
  EXPECT_THAT(LoadError(dir, "[t1.evicton]\npolicy = \"lru\"\n"),
              HasSubstr("x.toml:1: [t1.evicton]: unknown section"));
  EXPECT_THAT(LoadError(dir, "t1 = 5\n"),
              HasSubstr("x.toml:1: t1: is a section ([t1]), not a value"));
}

TEST(ConfigTest, EveryProblemOfTheFileIsReportedInLineOrder) {
  TempDir dir;
  const std::string error =
      LoadError(dir, "[t2]\nqueue_depth = \"deep\"\n[t1]\nleaf_first = \"yes\"\nbogus = 1\n");
  const std::vector<std::string> lines = absl::StrSplit(error, '\n');
  ASSERT_EQ(lines.size(), 3u) << error;
  EXPECT_THAT(lines[0],
              HasSubstr("x.toml:2: t2.queue_depth: expected an integer, got the string \"deep\""));
  EXPECT_THAT(lines[1],
              HasSubstr("x.toml:4: t1.leaf_first: expected true or false, got the string \"yes\""));
  EXPECT_THAT(lines[2], HasSubstr("x.toml:5: t1.bogus: unknown key in [t1]"));
}

TEST(ConfigTest, BadSizeNamesFileLineKeyAndAFix) {
  TempDir dir;
  const std::string path = dir.path() + "/x.toml";
  EXPECT_EQ(LoadError(dir, "# T1\n[t1]\ncapacity_bytes = \"8 GB\"\n"),
            path +
                ":3: t1.capacity_bytes: '8 GB' is not a size; use e.g. 8GiB or 8589934592 "
                "(units: B, KiB, MiB, GiB, TiB)");
  EXPECT_THAT(LoadError(dir, "[t1]\nslot_bytes = \"8GiB\"\n"),
              HasSubstr(":2: t1.slot_bytes: 8589934592 bytes is more than this setting holds"));
}

TEST(ConfigTest, WatermarkOrderNamesTheLineOfTheKey) {
  TempDir dir;
  const std::string path = dir.path() + "/x.toml";
  EXPECT_EQ(LoadError(dir, "[t1]\nhigh_watermark = 0.95\nlow_watermark = 0.97\n"),
            path + ":3: t1.low_watermark: 0.97 is above t1.high_watermark (0.95)");
  EXPECT_EQ(LoadError(dir, "[t2]\nhigh_watermark = 1.5\n"),
            path + ":2: t2.high_watermark: 1.5 is not in (0, 1]");
}

TEST(ConfigTest, PolicyNamesComeFromTheIndex) {
  TempDir dir;
  EXPECT_THAT(
      LoadError(dir, "[t2.eviction]\npolicy = \"lfu\"\n"),
      HasSubstr(":2: t2.eviction.policy: 'lfu' is not one of lru, fifo, sieve, s3fifo, arc"));
  EXPECT_THAT(LoadError(dir, "[t1]\neviction.s3fifo_small_fraction = 1.0\n"),
              HasSubstr(":2: t1.eviction.s3fifo_small_fraction: must be in (0, 1)"));
  EXPECT_THAT(LoadError(dir, "[t2.admission]\npolicy = \"twice\"\n"),
              HasSubstr("t2.admission.policy: 'twice' is not one of all, second"));
}

TEST(ConfigTest, TierChecksNameTheKeyTheyAreAbout) {
  TempDir dir;
  EXPECT_THAT(LoadError(dir, "[t1]\nslot_bytes = 1000\n"),
              HasSubstr(":2: t1.slot_bytes: 1000 is not a positive multiple of 4096"));
  EXPECT_THAT(
      LoadError(dir, "[t2]\ncapacity_bytes = \"3MiB\"\n"),
      HasSubstr(":2: t2.capacity_bytes: 3145728 is not a positive multiple of t1.slot_bytes"));
  EXPECT_THAT(LoadError(dir, "[index]\nnum_shards = 48\n"),
              HasSubstr(":2: index.num_shards: 48 is not a power of two in [1, 4096]"));
  EXPECT_THAT(LoadError(dir, "[metrics]\nlisten_address = \"localhost\"\n"),
              HasSubstr(":2: metrics.listen_address: 'localhost' is not host:port"));
  EXPECT_THAT(LoadError(dir, "[daemon]\nsocket_path = \"" + std::string(120, 's') + "\"\n"),
              HasSubstr(":2: daemon.socket_path: '"));
  EXPECT_THAT(LoadError(dir, "[daemon]\nspin_us = 2000000\n"),
              HasSubstr(":2: daemon.spin_us: 2000000 is more than 1000000 (one second)"));
}

// What one client may take, and the metrics endpoint's threads and timeout.
TEST(ConfigTest, ClientLimitsAreCheckedAgainstTheDefaultsAndTheProtocol) {
  TempDir dir;
  EXPECT_THAT(LoadError(dir, "[daemon]\nmax_connections = 0\n"),
              HasSubstr(":2: daemon.max_connections: must be > 0"));
  EXPECT_THAT(LoadError(dir, "[daemon]\nmax_ring_entries = 128\n"),
              HasSubstr(":2: daemon.max_ring_entries: 128 is not in [256, 65536]"));
  EXPECT_THAT(LoadError(dir, "[daemon]\nmax_ring_entries = 131072\n"),
              HasSubstr(":2: daemon.max_ring_entries: 131072 is not in [256, 65536]"));
  EXPECT_THAT(LoadError(dir, "[daemon]\nmax_arena_bytes = \"1MiB\"\n"),
              HasSubstr(":2: daemon.max_arena_bytes: 1048576 is not in [2MiB, 1GiB]"));
  EXPECT_THAT(LoadError(dir, "[daemon]\nmax_arena_bytes = \"2GiB\"\n"),
              HasSubstr(":2: daemon.max_arena_bytes: 2147483648 is not in [2MiB, 1GiB]"));
  EXPECT_THAT(LoadError(dir, "[metrics]\nthreads = 0\n"),
              HasSubstr(":2: metrics.threads: 0 is not in [1, 1024]"));
  EXPECT_THAT(LoadError(dir, "[metrics]\nrequest_timeout_ms = 0\n"),
              HasSubstr(":2: metrics.request_timeout_ms: 0 is not in [1, 600000]"));
}

TEST(ConfigTest, DisabledT2IsNotCheckedAndNotPassedOn) {
  TempDir dir;
  absl::StatusOr<DaemonConfig> config =
      LoadConfig(dir.Write("x.toml", "[t2]\nenabled = false\ndirectories = []\n"), {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->ManagerOptions().t2.has_value());
}

TEST(ConfigTest, SyntaxErrorsAndMissingFilesNameThePath) {
  TempDir dir;
  EXPECT_THAT(LoadError(dir, "[t1]\ncapacity_bytes = = 3\n"), HasSubstr("x.toml:2: "));
  const absl::StatusOr<DaemonConfig> missing = LoadConfig(dir.path() + "/none.toml", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), StartsWith(dir.path() + "/none.toml:"));
}

TEST(ConfigTest, PathsThatAreNotRegularFilesAreRefusedByKind) {
  TempDir dir;
  const absl::StatusOr<DaemonConfig> directory = LoadConfig(dir.path(), {});
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().message(),
            dir.path() + ": is a directory; --config takes a readable regular file");
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const absl::StatusOr<DaemonConfig> pipe = LoadConfig(fifo, {});  // would block reading
  ASSERT_FALSE(pipe.ok());
  EXPECT_THAT(std::string(pipe.status().message()), HasSubstr(fifo + ": is a FIFO"));
}

// docs/configuration.md promises every problem at once: those of reading the values (unknown key,
// wrong type, bad size, bad choice), of the flags, of names that do not resolve, of the checks of
// each value and across values, and of the directories.
TEST(ConfigTest, EveryProblemOfEveryStageIsReportedAtOnceWithFileLineAndKey) {
  TempDir dir;
  const std::string file = dir.Write("x.toml",
                                     "[daemon]\n"                                       // 1
                                     "allowed_users = [\"no-such-user-kvtier\"]\n"      // 2
                                     "spin_us = 2000000\n"                              // 3
                                     "[metrics]\n"                                      // 4
                                     "listen_address = \"localhost\"\n"                 // 5
                                     "[index]\n"                                        // 6
                                     "num_shards = 48\n"                                // 7
                                     "[t1]\n"                                           // 8
                                     "capacity = \"8GiB\"\n"                            // 9
                                     "leaf_first = \"yes\"\n"                           // 10
                                     "slot_bytes = 1000\n"                              // 11
                                     "high_watermark = 0.5\n"                           // 12
                                     "eviction.s3fifo_small_fraction = 1.5\n"           // 13
                                     "[t2]\n"                                           // 14
                                     "capacity_bytes = \"8 GB\"\n"                      // 15
                                     "queue_depth = 0\n"                                // 16
                                     "directories = [\"/nonexistent-kvtier/nvme0\"]\n"  // 17
                                     "eviction.policy = \"lfu\"\n");                    // 18
  const absl::StatusOr<DaemonConfig> config =
      LoadConfig(file, {{"t1.touch_threads", "-1", "--t1.touch_threads"}});
  ASSERT_FALSE(config.ok());
  const std::vector<std::string> lines = absl::StrSplit(config.status().message(), '\n');
  const std::string at = file + ":";
  const std::vector<std::string> expected = {
      at + "2: daemon.allowed_users[0]: no user named 'no-such-user-kvtier'",
      at + "3: daemon.spin_us: 2000000 is more than 1000000",
      at + "5: metrics.listen_address: 'localhost' is not host:port",
      at + "7: index.num_shards: 48 is not a power of two",
      at + "9: t1.capacity: unknown key in [t1]",
      at + "10: t1.leaf_first: expected true or false",
      at + "11: t1.slot_bytes: 1000 is not a positive multiple of 4096",
      at + "12: t1.low_watermark: 0.9 is above t1.high_watermark (0.5)",
      at + "13: t1.eviction.s3fifo_small_fraction: must be in (0, 1)",
      at + "15: t2.capacity_bytes: '8 GB' is not a size",
      at + "16: t2.queue_depth: 0 is not in [1, 4096]",
      at + "17: t2.directories[0]: /nonexistent-kvtier/nvme0 does not exist",
      at + "18: t2.eviction.policy: 'lfu' is not one of",
      "--t1.touch_threads: t1.touch_threads: -1 is not in [0, ",
  };
  ASSERT_EQ(lines.size(), expected.size()) << config.status().message();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_THAT(lines[i], StartsWith(expected[i])) << config.status().message();
  }
}

TEST(ConfigTest, UsersAndGroupsResolveByNameOrId) {
  TempDir dir;
  absl::StatusOr<DaemonConfig> config = LoadConfig(
      dir.Write("x.toml",
                "[daemon]\nallowed_users = [\"root\", 4321]\nallowed_groups = [\"root\"]\n"),
      {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->daemon.allowed_uids, (std::vector<uid_t>{0, 4321}));
  EXPECT_EQ(config->daemon.allowed_gids, (std::vector<gid_t>{0}));
  EXPECT_THAT(
      LoadError(dir, "[daemon]\nallowed_users = [\"root\", \"no-such-user-kvtier\"]\n"),
      HasSubstr(":2: daemon.allowed_users[1]: no user named 'no-such-user-kvtier' on this system"));
  EXPECT_THAT(LoadError(dir, "[daemon]\nallowed_groups = [\"no-such-group-kvtier\"]\n"),
              HasSubstr(":2: daemon.allowed_groups[0]: no group named 'no-such-group-kvtier'"));
}

TEST(ConfigTest, OverridesWinOverTheFileInOrder) {
  TempDir dir;
  const std::string path = dir.Write("x.toml", "[t1]\ncapacity_bytes = \"2GiB\"\n");
  absl::StatusOr<DaemonConfig> config =
      LoadConfig(path, {{"t1.capacity_bytes", "4GiB", "--t1.capacity_bytes"},
                        {"t2.directories", "a,b", "--t2.directories"},
                        {"t1.leaf_first", "true", "--set t1.leaf_first"},
                        {"t1.capacity_bytes", "8589934592", "--set t1.capacity_bytes"},
                        {"t1.eviction.policy", "s3fifo", "--t1.eviction.policy"},
                        {"t1.high_watermark", "1", "--t1.high_watermark"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tiers.t1.capacity_bytes, uint64_t{8} << 30);
  EXPECT_EQ(config->tiers.t2->directories, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(config->tiers.t1_policy.leaf_first);
  EXPECT_EQ(config->tiers.t1_policy.eviction.policy, "s3fifo");
  EXPECT_EQ(config->tiers.t1_policy.high_watermark, 1.0);
  EXPECT_EQ(config->origins.at("t1.capacity_bytes"), "--set t1.capacity_bytes");
}

TEST(ConfigTest, OverrideErrorsNameTheFlag) {
  TempDir dir;
  EXPECT_EQ(LoadError(dir, "", {{"t1.capacity_bytes", "8 GB", "--t1.capacity_bytes"}}),
            "--t1.capacity_bytes: t1.capacity_bytes: '8 GB' is not a size; use e.g. 8GiB or "
            "8589934592 (units: B, KiB, MiB, GiB, TiB)");
  EXPECT_EQ(LoadError(dir, "", {{"t1.low_watermark", "0.99", "--set t1.low_watermark"}}),
            "--set t1.low_watermark: t1.low_watermark: 0.99 is above t1.high_watermark (0.95)");
  EXPECT_THAT(LoadError(dir, "", {{"t1.capacity", "1", "--set t1.capacity"}}),
              StartsWith("--set t1.capacity: t1.capacity: unknown key in [t1]"));
  EXPECT_THAT(LoadError(dir, "", {{"t2.directories", "[1", "--t2.directories"}}),
              StartsWith("--t2.directories: t2.directories: "));
}

TEST(ConfigTest, MissingT2DirectoryIsNamedByIndexAndLine) {
  TempDir dir;
  absl::StatusOr<DaemonConfig> config = LoadConfig(
      dir.Write("x.toml", "[daemon]\ndata_directory = \"" + dir.path() +
                              "/data\"\n[t2]\ndirectories = [\"/nonexistent-kvtier/nvme0\"]\n"),
      {});
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::Status s = PrepareDirectories(*config);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), dir.path() +
                             "/x.toml:4: t2.directories[0]: /nonexistent-kvtier/nvme0 "
                             "does not exist");
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() + "/data"));  // its own directory is made
}

TEST(ConfigTest, T2DirectoriesInsideTheDataDirectoryAreCreated) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  absl::StatusOr<DaemonConfig> config =
      LoadConfig("", {{"daemon.data_directory", data, "--daemon.data_directory"},
                      {"t2.directories", data + "/t2," + data + "/sub/t2b", "--t2.directories"}});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(PrepareDirectories(*config).ok());
  EXPECT_TRUE(std::filesystem::is_directory(data + "/t2"));
  EXPECT_TRUE(std::filesystem::is_directory(data + "/sub/t2b"));
}

}  // namespace
}  // namespace kvtier
