// kvtierd's command line: flags per key and --set in command-line order, usage errors (exit 2),
// --help listing every key; and the real binary's --check-config (0 good, 2 bad with the key on
// stderr).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include "daemon/cli.h"
#include "daemon/config_schema.h"
#include "tests/daemon/config_test_util.h"

namespace kvtier {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::TempDir;

struct Parsed {
  std::optional<int> exit_code;
  KvtierdArgs args;
  std::string out, err;
};

Parsed Parse(std::vector<std::string> argv) {
  argv.insert(argv.begin(), "kvtierd");
  std::vector<char*> ptrs;
  for (std::string& a : argv) ptrs.push_back(a.data());
  Parsed p;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  p.exit_code = ParseKvtierdArgs(static_cast<int>(ptrs.size()), ptrs.data(), &p.args);
  p.out = ::testing::internal::GetCapturedStdout();
  p.err = ::testing::internal::GetCapturedStderr();
  return p;
}

TEST(KvtierdCliTest, FlagsBecomeOverridesInCommandLineOrder) {
  const Parsed p =
      Parse({"--config", "x.toml", "--t1.capacity_bytes", "2GiB", "--set", "t1.leaf_first=true",
             "--record", "trace.jsonl", "--t1.capacity_bytes=3GiB", "--check-config"});
  ASSERT_FALSE(p.exit_code.has_value()) << p.err;
  EXPECT_EQ(p.args.config_path, "x.toml");
  EXPECT_TRUE(p.args.check_config);
  ASSERT_EQ(p.args.overrides.size(), 4u);
  const std::vector<std::tuple<std::string, std::string, std::string>> want = {
      {"t1.capacity_bytes", "2GiB", "--t1.capacity_bytes"},
      {"t1.leaf_first", "true", "--set t1.leaf_first"},
      {"daemon.record_file", "trace.jsonl", "--record"},
      {"t1.capacity_bytes", "3GiB", "--t1.capacity_bytes"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p.args.overrides[i].key, std::get<0>(want[i]));
    EXPECT_EQ(p.args.overrides[i].value, std::get<1>(want[i]));
    EXPECT_EQ(p.args.overrides[i].origin, std::get<2>(want[i]));
  }
}

TEST(KvtierdCliTest, UsageErrorsExitTwoNamingTheFlag) {
  Parsed p = Parse({"--set", "t1.capacity_bytes"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.err, HasSubstr("--set t1.capacity_bytes: expected KEY=VALUE"));
  p = Parse({"--t1.capacity", "2GiB"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.err, HasSubstr("--t1.capacity"));
  p = Parse({"--t1.capacity_bytes"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.err, HasSubstr("--t1.capacity_bytes"));
}

TEST(KvtierdCliTest, HelpListsEveryKeyWithItsDefault) {
  const Parsed p = Parse({"--help"});
  EXPECT_EQ(p.exit_code, 0);
  const DaemonConfig defaults;
  for (const ConfigKey& key : ConfigKeys()) {
    EXPECT_THAT(p.out, HasSubstr("--" + key.name + " ")) << key.name;
    EXPECT_THAT(p.out, HasSubstr(fmt::format("(default: {})", key.get(defaults)))) << key.name;
  }
}

// Runs the built kvtierd in `cwd`; its exit code, with stderr in *err.
int RunKvtierd(const TempDir& cwd, const std::string& args, std::string* err) {
  const std::string err_file = cwd.path() + "/stderr.txt";
  const std::string command = fmt::format("cd '{}' && '{}/daemon/kvtierd' {} >/dev/null 2>'{}'",
                                          cwd.path(), KVTIER_BINARY_DIR, args, err_file);
  const int status = std::system(command.c_str());
  *err = ReadFile(err_file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(KvtierdCliTest, CheckConfigAcceptsTheDefaultConfigAndMakesItsDataDirectory) {
  TempDir cwd;
  std::string err;
  EXPECT_EQ(
      RunKvtierd(cwd, "--check-config --config " KVTIER_SOURCE_DIR "/configs/default.toml", &err),
      0)
      << err;
  EXPECT_THAT(err, HasSubstr("config is valid"));
  EXPECT_TRUE(std::filesystem::is_directory(cwd.path() + "/kvtier-data/t2"));
}

TEST(KvtierdCliTest, LogFileTakesTheLogLinesAtTheConfiguredLevel) {
  TempDir cwd;
  std::string err;
  ASSERT_EQ(
      RunKvtierd(cwd, "--check-config --daemon.log_file d.log --daemon.log_level debug", &err), 0)
      << err;
  EXPECT_EQ(err, "");
  const std::string log = ReadFile(cwd.path() + "/d.log");
  EXPECT_THAT(log, HasSubstr("debug [daemon] config t1.capacity_bytes = \"1GiB\""));
  EXPECT_THAT(log, HasSubstr("info [daemon] config is valid"));
}

TEST(KvtierdCliTest, CheckConfigRefusesABrokenConfigWithExitTwo) {
  TempDir cwd;
  const std::string path = cwd.Write("broken.toml", "[t1]\ncapacity_bytes = \"8 GB\"\n");
  std::string err;
  EXPECT_EQ(RunKvtierd(cwd, "--check-config --config " + path, &err), 2);
  EXPECT_THAT(err, HasSubstr("broken.toml:2: t1.capacity_bytes: '8 GB' is not a size"));
  EXPECT_EQ(RunKvtierd(cwd, "--check-config --t1.low_watermark 0.99", &err), 2);
  EXPECT_THAT(err, HasSubstr("--t1.low_watermark: t1.low_watermark: 0.99 is above"));
  EXPECT_EQ(RunKvtierd(cwd, "--check-config --t2.directories /nonexistent-kvtier", &err), 2);
  EXPECT_THAT(err,
              HasSubstr("--t2.directories: t2.directories[0]: /nonexistent-kvtier does not exist"));
}

// A directory given as the config file used to read as an empty file: the daemon started on the
// defaults and made a 4 GiB T2 file under ./kvtier-data. It is refused, named, and nothing is made.
TEST(KvtierdCliTest, ConfigThatIsADirectoryIsRefusedAndNothingIsCreated) {
  TempDir cwd;
  std::filesystem::create_directories(cwd.path() + "/conf.d");
  std::string err;
  EXPECT_EQ(RunKvtierd(cwd, "--config conf.d", &err), 2);
  EXPECT_THAT(err, HasSubstr("kvtierd: conf.d: is a directory; --config takes a readable "
                             "regular file"));
  EXPECT_FALSE(std::filesystem::exists(cwd.path() + "/kvtier-data"));
  EXPECT_EQ(RunKvtierd(cwd, "--check-config --config /dev/null", &err), 2);
  EXPECT_THAT(err, HasSubstr("/dev/null: is a character device"));
}

// A start that fails after T2 is open (here the socket cannot be bound) takes the T2 files it made
// with it: a later start with another t2.capacity_bytes is not refused for a leftover file.
TEST(KvtierdCliTest, AFailedStartRemovesTheT2FilesItCreated) {
  TempDir cwd;
  const std::string flags =
      "--metrics.enabled false --t1.capacity_bytes 8MiB --t1.slot_bytes 64KiB "
      "--t1.dma_chunk_bytes 8MiB --t1.huge_pages off --t1.touch_threads 1 ";
  std::string err;
  EXPECT_EQ(RunKvtierd(cwd,
                       flags + "--t2.capacity_bytes 16MiB --daemon.socket_path "
                               "/nonexistent-kvtier/kvtierd.sock",
                       &err),
            1);
  EXPECT_THAT(err, HasSubstr("/nonexistent-kvtier/kvtierd.sock"));
  EXPECT_TRUE(std::filesystem::is_directory(cwd.path() + "/kvtier-data/t2"));
  EXPECT_FALSE(std::filesystem::exists(cwd.path() + "/kvtier-data/t2/kvtier-t2.slots"));
  EXPECT_FALSE(std::filesystem::exists(cwd.path() + "/kvtier-data/t2/kvtier-t2-meta"));
}

}  // namespace
}  // namespace kvtier
