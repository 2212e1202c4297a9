// [[pools]] in kvtierd's config (config.h PoolSpec, PoolPlans; docs/configuration.md "Memory
// pools"): what each pool gets, and each mistake an error naming the file, the line and the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/config.h"
#include "tests/daemon/config_test_util.h"

namespace kvtier {
namespace {

using ::testing::HasSubstr;
using testing::LoadError;
using testing::TempDir;

constexpr const char* kBase = R"([t1]
capacity_bytes = "64MiB"
slot_bytes = "1MiB"
[t2]
capacity_bytes = "128MiB"
directories = ["/mnt/nvme0"]
)";

absl::StatusOr<DaemonConfig> Load(const TempDir& dir, const std::string& pools) {
  return LoadConfig(dir.Write("x.toml", std::string(kBase) + pools), {});
}

TEST(ConfigPoolsTest, WithoutPoolsThereIsOnePoolAsBefore) {
  absl::StatusOr<DaemonConfig> config = LoadConfig("", {});
  ASSERT_TRUE(config.ok()) << config.status();
  const std::vector<PoolPlan> plans = config->PoolPlans();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].name, "default");
  EXPECT_FALSE(plans[0].pool_scoped_keys);
  EXPECT_EQ(plans[0].tiers.t1.capacity_bytes, config->ManagerOptions().t1.capacity_bytes);
  EXPECT_EQ(plans[0].tiers.t1.segment_name, "kvtier-t1");
  EXPECT_EQ(plans[0].tiers.t2->directories, config->ManagerOptions().t2->directories);
}

TEST(ConfigPoolsTest, EachPoolGetsItsOwnSegmentDirectoryAndShareOfTheTiers) {
  TempDir dir;
  absl::StatusOr<DaemonConfig> config = Load(dir, R"(
[daemon]
allowed_users = [7]
[[pools]]
name = "a"
users = [1001]
t1_capacity_bytes = "16MiB"
t1_high_watermark = 0.8
t1_low_watermark = 0.6
numa_pci_bus_id = "0000:3b:00.0"
[[pools]]
name = "b"
groups = [2002]
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const std::vector<PoolPlan> plans = config->PoolPlans();
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_TRUE(plans[0].pool_scoped_keys);
  EXPECT_EQ(plans[0].tiers.t1.capacity_bytes, uint64_t{16} << 20);
  EXPECT_EQ(plans[1].tiers.t1.capacity_bytes, uint64_t{32} << 20);  // 64 MiB / 2 pools
  EXPECT_EQ(plans[0].tiers.t1.segment_name, "kvtier-t1-a");
  EXPECT_EQ(plans[1].tiers.t1.segment_name, "kvtier-t1-b");
  EXPECT_EQ(plans[0].tiers.t1.numa_pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(plans[0].tiers.t1_policy.high_watermark, 0.8);
  EXPECT_EQ(plans[1].tiers.t1_policy.high_watermark, config->tiers.t1_policy.high_watermark);
  EXPECT_EQ(plans[0].tiers.t2->directories, (std::vector<std::string>{"/mnt/nvme0/a"}));
  EXPECT_EQ(plans[1].tiers.t2->capacity_bytes, uint64_t{64} << 20);
  // daemon.allowed_users may use every pool; each pool's own users only theirs.
  EXPECT_EQ(plans[0].uids, (std::vector<uid_t>{1001, 7}));
  EXPECT_EQ(plans[1].uids, (std::vector<uid_t>{7}));
  EXPECT_EQ(plans[1].gids, (std::vector<gid_t>{2002}));
}

TEST(ConfigPoolsTest, DuplicateNamesAreNamedWithTheOtherEntry) {
  TempDir dir;
  const std::string text = std::string(kBase) +
                           "[[pools]]\nname = \"a\"\nusers = [1]\n"
                           "[[pools]]\nname = \"a\"\nusers = [2]\n";
  EXPECT_THAT(LoadError(dir, text), HasSubstr("pools[1].name: 'a' is also the name of pools[0]"));
}

TEST(ConfigPoolsTest, APoolNobodyMayUseIsAnError) {
  TempDir dir;
  EXPECT_THAT(LoadError(dir, std::string(kBase) + "[[pools]]\nname = \"lonely\"\n"),
              HasSubstr("pools[0].users: empty, and so is its groups: name who may use pool "
                        "'lonely'"));
}

TEST(ConfigPoolsTest, AUserOrGroupInTwoPoolsIsAnError) {
  TempDir dir;
  const std::string text = std::string(kBase) +
                           "[[pools]]\nname = \"a\"\nusers = [5]\ngroups = [9]\n"
                           "[[pools]]\nname = \"b\"\nusers = [\"5\"]\ngroups = [9]\n";
  const std::string error = LoadError(dir, text);
  EXPECT_THAT(error, HasSubstr("pools[1].users: id 5 is also in pools[0].users"));
  EXPECT_THAT(error, HasSubstr("pools[1].groups: id 9 is also in pools[0].groups"));
}

TEST(ConfigPoolsTest, CapacitiesThatDoNotFitTheTierAreErrors) {
  TempDir dir;
  const std::string text = std::string(kBase) +
                           "[[pools]]\nname = \"a\"\nusers = [1]\nt1_capacity_bytes = \"48MiB\"\n"
                           "t2_capacity_bytes = \"1000000\"\n"
                           "[[pools]]\nname = \"b\"\nusers = [2]\nt1_capacity_bytes = \"32MiB\"\n";
  const std::string error = LoadError(dir, text);
  EXPECT_THAT(error, HasSubstr("pools: the pools' t1_capacity_bytes add up to 83886080, more than "
                               "t1.capacity_bytes (67108864)"));
  EXPECT_THAT(error, HasSubstr("pools[0].t2_capacity_bytes: 1000000 is not a positive multiple of "
                               "t1.slot_bytes (1048576)"));
}

TEST(ConfigPoolsTest, BadEntriesAreNamedWithTheirKey) {
  TempDir dir;
  EXPECT_THAT(LoadError(dir, std::string(kBase) + "[[pools]]\nname = \"a\"\nsize = 3\n"),
              HasSubstr("pools[0].size: unknown key (known: name, users, groups,"));
  EXPECT_THAT(LoadError(dir, std::string(kBase) +
                                 "[[pools]]\nname = \"a\"\nusers = [1]\nt1_capacity_bytes = "
                                 "\"8 GB\"\n"),
              HasSubstr("x.toml:7: pools[0].t1_capacity_bytes: "));
  EXPECT_THAT(LoadError(dir, std::string(kBase) + "[[pools]]\nname = \"a b\"\nusers = [1]\n"),
              HasSubstr("pools[0].name: 'a b' must be 1 to 32 letters, digits, _ or -"));
  EXPECT_THAT(LoadError(dir, std::string(kBase) +
                                 "[[pools]]\nname = \"a\"\nusers = [1]\nt1_low_watermark = 0.99\n"),
              HasSubstr("pools[0].t1_low_watermark: 0.99 is above its high watermark (0.95)"));
  EXPECT_THAT(LoadError(dir, "pools = 3\n" + std::string(kBase)),
              HasSubstr("pools: is not an array of tables"));
}

TEST(ConfigPoolsTest, PoolNameMustNameOneOfThePools) {
  TempDir dir;
  EXPECT_THAT(LoadError(dir, std::string(kBase) +
                                 "[pool]\nname = \"c\"\n[[pools]]\nname = \"a\"\nusers = [1]\n"),
              HasSubstr("pool.name: 'c' is not the name of any [[pools]] entry"));
  EXPECT_TRUE(Load(dir, "[pool]\nname = \"a\"\n[[pools]]\nname = \"a\"\nusers = [1]\n").ok());
}

// The example of docs/configuration.md's pools, as shipped in configs/.
TEST(ConfigPoolsTest, TheExamplePoolsConfigLoads) {
  absl::StatusOr<DaemonConfig> config = LoadConfig(KVTIER_SOURCE_DIR "/configs/pools.toml", {});
  ASSERT_TRUE(config.ok()) << config.status();
  const std::vector<PoolPlan> plans = config->PoolPlans();
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[1].tiers.t1.capacity_bytes, uint64_t{4} << 30);
  EXPECT_EQ(plans[1].tiers.t2->directories,
            (std::vector<std::string>{"/var/lib/kvtier/t2/tenant-b"}));
}

// The command line takes the same entries as an inline array.
TEST(ConfigPoolsTest, PoolsCanBeGivenOnTheCommandLine) {
  absl::StatusOr<DaemonConfig> config = LoadConfig(
      "", {{"pools", "[{name = \"x\", users = [3]}, {name = \"y\", groups = [4]}]", "--pools"}});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->pools.size(), 2u);
  EXPECT_EQ(config->pools[1].gids, (std::vector<gid_t>{4}));
  EXPECT_THAT(
      std::string(LoadConfig("", {{"pools", "[{name = 1}]", "--pools"}}).status().message()),
      HasSubstr("--pools: pools[0].name: "));
}

}  // namespace
}  // namespace kvtier
