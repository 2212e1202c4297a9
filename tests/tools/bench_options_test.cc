// `kvtier bench`'s flags: defaults, every flag reaching its option, combinations refused with the
// flag named; and the report's fields.
#include "tools/bench/bench_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "tools/bench/bench_report.h"

namespace kvtier::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<BenchOptions> Parse(std::vector<std::string> args) {
  CLI::App app;
  BenchFlags flags;
  AddBenchFlags(&app, &flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  return ResolveBenchFlags(flags);
}

TEST(BenchOptionsTest, DefaultsAreOneLookupClientOnTheDefaultSocket) {
  const absl::StatusOr<BenchOptions> o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->op, BenchOp::kLookup);
  EXPECT_EQ(o->keys, 1u);
  EXPECT_EQ(o->workers(), 1u);
  EXPECT_EQ(o->socket_path, "kvtier-data/kvtierd.sock");
  EXPECT_EQ(o->space.dist, KeyDist::kUniform);
}

TEST(BenchOptionsTest, EveryFlagReachesItsOption) {
  const absl::StatusOr<BenchOptions> o = Parse({"--socket",
                                                "/tmp/s.sock",
                                                "--op",
                                                "get",
                                                "--keys",
                                                "64",
                                                "--dist",
                                                "zipf",
                                                "--skew",
                                                "1.2",
                                                "--sequences",
                                                "500",
                                                "--seed",
                                                "9",
                                                "-p",
                                                "2",
                                                "-t",
                                                "3",
                                                "-d",
                                                "1.5",
                                                "--ops",
                                                "100",
                                                "--payload-bytes",
                                                "4096",
                                                "--fill",
                                                "--compare-socket",
                                                "--compare-memcpy",
                                                "--model",
                                                "m"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->socket_path, "/tmp/s.sock");
  EXPECT_EQ(o->op, BenchOp::kGet);
  EXPECT_EQ(o->keys, 64u);
  EXPECT_EQ(o->space.dist, KeyDist::kZipf);
  EXPECT_DOUBLE_EQ(o->space.zipf_skew, 1.2);
  EXPECT_EQ(o->space.sequences, 500u);
  EXPECT_EQ(o->space.seed, 9u);
  EXPECT_EQ(o->workers(), 6u);
  EXPECT_DOUBLE_EQ(o->duration_s, 1.5);
  EXPECT_EQ(o->ops, 100u);
  EXPECT_EQ(o->payload_bytes, 4096u);
  EXPECT_TRUE(o->fill && o->compare_socket && o->compare_memcpy);
  EXPECT_EQ(o->model_id, "m");
}

TEST(BenchOptionsTest, DepthSendsManyLookupsPerCall) {
  const absl::StatusOr<BenchOptions> o = Parse({"--depth", "64"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->depth, 64u);
  EXPECT_EQ(o->op, BenchOp::kLookup);
}

TEST(BenchOptionsTest, ATraceReplaysAsMixedOps) {
  const absl::StatusOr<BenchOptions> o = Parse({"--trace", "t.jsonl", "--speed", "1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->op, BenchOp::kMixed);
  EXPECT_FALSE(Parse({"--trace", "t.jsonl", "--op", "put"}).ok());
  EXPECT_FALSE(Parse({"--trace", "t.jsonl", "--op", "lookup"}).ok());  // not silently mixed
  EXPECT_EQ(Parse({"--trace", "t.jsonl", "--op", "mixed"})->op, BenchOp::kMixed);
}

TEST(BenchOptionsTest, BadValuesAreRefusedNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--keys", "0"}, "--keys 0"},   {{"--keys", "1025"}, "--keys 1025"},
      {{"--op", "scan"}, "--op scan"}, {{"--dist", "pareto"}, "pareto"},
      {{"-p", "0"}, "--processes"},    {{"-t", "0"}, "--threads"},
      {{"-d", "0"}, "--duration"},     {{"--sequences", "0"}, "--sequences"},
      {{"--skew", "-1"}, "--skew"},    {{"--op", "put", "--fill"}, "--fill"},
      {{"--depth", "0"}, "--depth 0"}, {{"--op", "get", "--depth", "8"}, "--depth"},
  };
  for (const auto& [args, flag] : cases) {
    const absl::StatusOr<BenchOptions> o = Parse(args);
    ASSERT_FALSE(o.ok()) << args[0];
    EXPECT_THAT(std::string(o.status().message()), HasSubstr(flag));
  }
}

TEST(BenchReportTest, PrintsARowPerOpWithPercentilesAndTheCeilings) {
  BenchOptions o;
  o.op = BenchOp::kMixed;
  o.keys = 64;
  BenchTotals t;
  t.window_s = 2;
  t.payload_bytes = 1000;
  OpStats& lookup = t.op[static_cast<int>(BenchOp::kLookup)];
  lookup.ops = 4, lookup.keys = 256, lookup.hit_keys = 64;
  for (uint64_t ns : {1000, 2000, 3000, 4000}) lookup.latency.Record(ns);
  OpStats& put = t.op[static_cast<int>(BenchOp::kPut)];
  put.ops = 2, put.keys = 192, put.hit_keys = 192, put.bytes = 192000;
  put.latency.Record(10000);
  Ceilings c;
  c.socket = LatencyHistogram();
  c.socket->Record(2015);  // the top of the bucket lookup's p50 (2000) falls in
  c.socket_request_bytes = 1088, c.socket_response_bytes = 128;
  c.memcpy_into_cold = 1e6;
  c.memcpy_into_t1_shaped = 5e5, c.t1_bytes = uint64_t{4} << 30;
  const std::string out = FormatBenchReport(o, t, c);
  EXPECT_THAT(out, HasSubstr("op mixed, 64 keys/op, uniform over"));
  EXPECT_THAT(out, HasSubstr("p50_us   p90_us   p99_us  p999_us"));
  EXPECT_THAT(out, HasSubstr("lookup           4            2          128   25.0"));
  EXPECT_THAT(out, HasSubstr("put              2            1           96  100.0"));
  EXPECT_THAT(out, Not(HasSubstr("\nget ")));
  EXPECT_THAT(out, HasSubstr("(1088 B out, 128 B back, 1 round trips): p50 2.0 us"));
  EXPECT_THAT(out, HasSubstr("ring p50 / socket p50 = 1.00"));  // lookup p50 is 2 us too
  EXPECT_THAT(out, HasSubstr("ceiling memcpy into cold memory (1 thread(s), 1000 B blocks): 0.001 "
                             "GB/s; put 0.000 GB/s = 10% of it"));
  EXPECT_THAT(out, Not(HasSubstr("out of cold memory")));
  EXPECT_THAT(out, HasSubstr("ceiling memcpy into a T1-shaped segment (4096 MiB shared, shuffled "
                             "slots) (1 thread(s), 1000 B blocks): 0.001 GB/s; put 0.000 GB/s = "
                             "19% of it"));
}

}  // namespace
}  // namespace kvtier::bench
