// `kvtier replay` as an operator meets it: argument errors (exit code 2, message names the flag),
// trace errors (exit code 1, file:line), --json with the contract keys, --compare, --sweep files.
// The subcommand runs in-process, parsed exactly as tools/kvtier_main.cc parses it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/replay/replay_command.h"

// --sweep draws with cairo, whose fontconfig keeps a process-lifetime cache that LeakSanitizer
// reports as a leak (as in plot_test.cc).
extern "C" const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\n"; }

namespace kvtier::replay {
namespace {

struct CliResult {
  int exit_code = 0;
  std::string out, err;
};

CliResult RunReplay(std::vector<std::string> args) {
  args.insert(args.begin(), {"kvtier", "replay"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  CLI::App app{"kvtier"};
  app.require_subcommand(1);
  CliResult result;
  RegisterReplayCommand(app, &result.exit_code);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    result.exit_code = app.exit(e);
  }
  result.out = ::testing::internal::GetCapturedStdout();
  result.err = ::testing::internal::GetCapturedStderr();
  return result;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  // Per process: ctest runs this binary's tests in parallel processes that share file names.
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

// Three requests sharing a two-block prefix, Mooncake format.
std::string SmallTrace() {
  return WriteFile(
      "replay_cli_small.jsonl",
      R"({"timestamp": 0, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 1, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 4]}
{"timestamp": 2, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}
)");
}

void ExpectUsageError(const std::vector<std::string>& args, const std::string& names) {
  const CliResult r = RunReplay(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(names), std::string::npos) << "stderr: " << r.err;
}

TEST(ReplayCliTest, ArgumentErrorsExitTwoNamingTheFlag) {
  const std::string trace = SmallTrace();
  ExpectUsageError({"--capacity-blocks", "8"}, "--trace");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "lots"}, "--capacity-blocks");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "0"}, "--capacity-blocks");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "8", "--policy", "mru"}, "--policy");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "8", "--admission", "x"}, "--admission");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "8", "--format", "csv"}, "--format");
  ExpectUsageError({"--trace", trace, "--capacity-bytes", "1GiB"}, "--block-bytes");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "8", "--compare", "lru,,opt"},
                   "--compare");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "8", "--read-gbps", "50,fast"},
                   "--read-gbps");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "8", "--prefill-tokens-per-s", "-1"},
                   "--prefill-tokens-per-s");
  ExpectUsageError({"--trace", trace}, "capacity");
  ExpectUsageError({"--trace", trace, "--capacity-blocks", "8", "--bogus"}, "--bogus");
}

TEST(ReplayCliTest, TierSpecErrorsNameTheTierAndTheKey) {
  const std::string trace = SmallTrace();
  ExpectUsageError(
      {"--trace", trace, "--tier", "capacity=8", "--tier", "name=disk,capacity=8,polcy=lru"},
      "--tier #2 (disk): unknown key 'polcy'");
  ExpectUsageError({"--trace", trace, "--tier", "name=T0,capacity=lots"},
                   "--tier #1 (T0): capacity");
  ExpectUsageError({"--trace", trace, "--tier", "name=T0,policy=lru"}, "capacity is required");
  ExpectUsageError({"--trace", trace, "--tier", "capacity=4,policy=opt", "--tier", "capacity=8"},
                   "opt");
  ExpectUsageError({"--trace", trace, "--tier", "capacity=8", "--capacity-blocks", "8"},
                   "exclusive");
  ExpectUsageError({"--trace", trace, "--tier", "name=T1,capacity=8", "--tier",
                    "name=T3,capacity=8,climb_to=T9"},
                   "--tier #2 (T3): climb_to: no tier above it is named 'T9'");
  ExpectUsageError({"--trace", trace, "--tier", "name=T3,capacity=8,latency_us=soon"},
                   "--tier #1 (T3): latency_us");
}

// A remote tier's keys (kvtierd's T3): its latency is reported with the cost model.
TEST(ReplayCliTest, ARemoteTierHasALatencyAndAClimbTarget) {
  const CliResult r = RunReplay({"--trace", SmallTrace(), "--block-bytes", "1000", "--json",
                                 "--tier", "name=T1,capacity=1", "--tier", "name=T2,capacity=1",
                                 "--tier", "name=T3,capacity=8,latency_us=300,climb_to=T1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tiers"].size(), 3u);
  EXPECT_DOUBLE_EQ(j["ttft"]["read_latency_us"][2].get<double>(), 300.0);
  EXPECT_DOUBLE_EQ(j["ttft"]["read_latency_us"][0].get<double>(), 0.0);
}

TEST(ReplayCliTest, MalformedTraceExitsOneWithFileAndLine) {
  const std::string bad =
      WriteFile("replay_cli_bad.jsonl",
                "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 1, "
                "\"hash_ids\": [1]}\n{\"timestamp\": oops}\n");
  const CliResult r = RunReplay({"--trace", bad, "--capacity-blocks", "8"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(bad + ":2"), std::string::npos) << r.err;
}

TEST(ReplayCliTest, JsonHasTheContractKeys) {
  const CliResult r = RunReplay({"--trace", SmallTrace(), "--capacity-blocks", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["requests"], 3);
  EXPECT_EQ(j["block_refs"], 8);
  EXPECT_EQ(j["unique_blocks"], 4);
  EXPECT_DOUBLE_EQ(j["block_hit_ratio"].get<double>(), 4.0 / 8.0);
  EXPECT_DOUBLE_EQ(j["prefix_hit_ratio"].get<double>(), 4.0 / 8.0);
  EXPECT_EQ(j["tiers"].size(), 1u);
}

TEST(ReplayCliTest, TiersInBytesUseTheBlockSize) {
  const CliResult r = RunReplay({"--trace", SmallTrace(), "--block-bytes", "1000", "--json",
                                 "--tier", "name=hbm,capacity=2KB", "--tier",
                                 "name=dram,capacity=50%,admission=second,read_gbps=40"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tiers"].size(), 2u);
  EXPECT_EQ(j["tiers"][0]["name"], "hbm");
  EXPECT_EQ(j["tiers"][0]["capacity_blocks"], 2);
  EXPECT_EQ(j["tiers"][1]["capacity_blocks"], 2);  // 50% of 4 unique blocks
  EXPECT_EQ(j["tiers"][1]["admission"], "second");
  EXPECT_DOUBLE_EQ(j["ttft"]["read_gbps"][1].get<double>(), 40.0);
}

TEST(ReplayCliTest, CompareRunsEveryPolicyIncludingOpt) {
  const CliResult table = RunReplay({"--trace", SmallTrace(), "--capacity-blocks", "2", "--compare",
                                     "lru,fifo,sieve,s3fifo,arc,opt"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char* policy : {"lru", "fifo", "sieve", "s3fifo", "arc", "opt"}) {
    EXPECT_NE(table.out.find(policy), std::string::npos) << table.out;
  }
  const CliResult json = RunReplay(
      {"--trace", SmallTrace(), "--capacity-blocks", "2", "--compare", "lru,opt", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][1]["tiers"][0]["policy"], "opt");
  EXPECT_GE(j["results"][1]["prefix_hit_ratio"].get<double>(),
            j["results"][0]["prefix_hit_ratio"].get<double>());
}

TEST(ReplayCliTest, SweepWritesACsvAndAPng) {
  const std::string prefix = ::testing::TempDir() + "/replay_cli_sweep";
  const CliResult r = RunReplay({"--trace", SmallTrace(), "--sweep", "--sweep-out", prefix,
                                 "--compare", "lru,s3fifo,opt", "--sweep-capacities", "1,2,4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream csv(prefix + ".csv");
  std::string header, line;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_EQ(header.rfind("policy,admission,capacity_blocks,capacity_fraction,", 0), 0u) << header;
  int rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 9);  // 3 policies x 3 capacities
  std::ifstream png(prefix + ".png", std::ios::binary);
  char magic[4] = {};
  png.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  EXPECT_GT(std::filesystem::file_size(prefix + ".png"), 0u);
}

// A few hundred requests over a few dozen prefix chains, so that admission and capacity matter.
std::string ChurnTrace() {
  std::string text;
  uint64_t x = 12345;
  for (int r = 0; r < 300; ++r) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t chain = (x >> 33) % 40, len = 1 + (x >> 20) % 6;
    std::string ids;
    for (uint64_t b = 0; b < len; ++b) ids += (b ? ", " : "") + std::to_string(chain * 100 + b);
    text += R"({"timestamp": 0, "input_length": )" + std::to_string(len * 512) +
            R"(, "output_length": 1, "hash_ids": [)" + ids + "]}\n";
  }
  return WriteFile("replay_cli_churn.jsonl", text);
}

double ReplayPrefixHit(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "--trace", ChurnTrace(), "--capacity-blocks", "20", "--admission", "second", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = RunReplay(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out)["prefix_hit_ratio"].get<double>();
}

double SweepPrefixHit(const std::vector<std::string>& extra) {
  const std::string prefix = ::testing::TempDir() + "/replay_cli_sweep_eq";
  std::vector<std::string> args = {"--trace", ChurnTrace(),         "--sweep", "--sweep-out",
                                   prefix,    "--compare",          "lru",     "--sweep-capacities",
                                   "20",      "--sweep-admissions", "second",  "--threads",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = RunReplay(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream csv(prefix + ".csv");
  std::string line;
  while (std::getline(csv, line)) {
    if (line.rfind("lru,second,20,", 0) != 0) continue;
    // policy,admission,capacity_blocks,capacity_fraction,block_hit,block_miss,prefix_hit,...
    size_t pos = 0;
    for (int field = 0; field < 6; ++field) pos = line.find(',', pos) + 1;
    return std::stod(line.substr(pos));
  }
  ADD_FAILURE() << "no lru,second,20 row in " << prefix << ".csv";
  return -1;
}

TEST(ReplayCliTest, SweepPointEqualsTheSameReplay) {
  // A sweep point must simulate exactly the tier `replay` builds from the same settings,
  // admission window included.
  // The CSV holds six decimals.
  EXPECT_NEAR(SweepPrefixHit({}), ReplayPrefixHit({}), 1e-6);
  EXPECT_NEAR(SweepPrefixHit({"--admission-window", "500"}),
              ReplayPrefixHit({"--admission-window", "500"}), 1e-6);
}

TEST(ReplayCliTest, AdmissionWindowIsAFlagAndATierKey) {
  // A window longer than the cache remembers first attempts that a capacity-sized one forgets.
  EXPECT_NE(ReplayPrefixHit({"--admission-window", "500"}), ReplayPrefixHit({}));
  const CliResult tier = RunReplay({"--trace", ChurnTrace(), "--json", "--tier",
                                    "capacity=20,admission=second,admission_window=500"});
  ASSERT_EQ(tier.exit_code, 0) << tier.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(tier.out)["prefix_hit_ratio"].get<double>(),
                   ReplayPrefixHit({"--admission-window", "500"}));
  ExpectUsageError({"--trace", ChurnTrace(), "--capacity-blocks", "20", "--admission-window", "0"},
                   "--admission-window");
  ExpectUsageError({"--trace", ChurnTrace(), "--tier", "capacity=20,admission_window=x"},
                   "admission_window");
}

TEST(ReplayCliTest, LeafFirstSurvivesIdsRepeatedWithinARequest) {
  // [k, k] and [a, b, a] would make a block its own ancestor; such links are not made, so every
  // block stays evictable and the tier holds its capacity.
  std::string text;
  for (int k = 1; k <= 100; ++k) {
    text += R"({"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [)" +
            std::to_string(k) + ", " + std::to_string(k) + "]}\n";
  }
  text +=
      R"({"timestamp": 0, "input_length": 1536, "output_length": 1, "hash_ids": [500, 501, 500]})";
  text += "\n";
  const CliResult r = RunReplay({"--trace", WriteFile("replay_cli_repeat.jsonl", text),
                                 "--capacity-blocks", "10", "--leaf-first", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tiers"][0]["evictions"].get<uint64_t>(), 102u - 10u);
}

TEST(ReplayCliTest, CapacitiesBeyondThirtyTwoBitsAreRefused) {
  ExpectUsageError({"--trace", SmallTrace(), "--tier", "capacity=1e300"}, "2^32 - 1");
  ExpectUsageError({"--trace", SmallTrace(), "--capacity-bytes", "1e30B", "--block-bytes", "1"},
                   "2^32 - 1");
}

}  // namespace
}  // namespace kvtier::replay
