#include "tools/replay/trace_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tools/common/input_stream.h"
#include "tools/replay/trace_interner.h"

namespace kvtier::replay {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "trace_reader_" + std::to_string(::getpid()) + "_" + name;
}

std::string WriteFile(const std::string& name, const std::string& content) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// Runs a shell command (gzip, zstd: installed by tools/setup.sh) and expects success.
void Shell(const std::string& command) { ASSERT_EQ(std::system(command.c_str()), 0) << command; }

const char kMooncake[] =
    "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [7, 8]}\n"
    "{\"timestamp\": 12, \"input_length\": 1536, \"output_length\": 5, \"hash_ids\": [7, 8, 9]}\n"
    "{\"timestamp\": 30.5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [100]}\n";

// The first line of kMooncake (with its newline), and the rest.
std::string Head() {
  std::string all = kMooncake;
  return all.substr(0, all.find('\n') + 1);
}
std::string Tail() { return std::string(kMooncake).substr(Head().size()); }

std::string Message(const absl::Status& status) { return std::string(status.message()); }

void ExpectMooncakeContent(const Trace& t) {
  ASSERT_EQ(t.num_requests(), 3u);
  EXPECT_EQ(t.refs, (std::vector<uint32_t>{0, 1, 0, 1, 2, 3}));
  EXPECT_EQ(t.request_begin, (std::vector<uint64_t>{0, 2, 5, 6}));
  EXPECT_EQ(t.hash_ids, (std::vector<uint64_t>{7, 8, 9, 100}));
  EXPECT_EQ(t.input_tokens, (std::vector<uint32_t>{1000, 1536, 10}));
  EXPECT_EQ(t.timestamp_ms, (std::vector<double>{0, 12, 30.5}));
  EXPECT_EQ(t.block_tokens, 512u);
  EXPECT_EQ(t.skipped_lines, 0u);
}

absl::StatusOr<Trace> Load(const std::string& path, bool skip_bad = false) {
  TraceLoadOptions options;
  options.skip_bad = skip_bad;
  return LoadTrace(path, options);
}

TEST(TraceReaderTest, ReadsMooncakeAndInternsIdsInFirstSeenOrder) {
  absl::StatusOr<Trace> t = Load(WriteFile("mooncake.jsonl", kMooncake));
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectMooncakeContent(*t);
}

TEST(TraceReaderTest, AutoDetectsBailianAndConvertsSecondsToMilliseconds) {
  std::string path = WriteFile(
      "bailian.jsonl",
      "{\"chat_id\": 159, \"parent_chat_id\": -1, \"timestamp\": 61.114, \"input_length\": 40, "
      "\"output_length\": 132, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [1089, 1090, 1091]}\n"
      "{\"chat_id\": 160, \"parent_chat_id\": 159, \"timestamp\": 62.5, \"input_length\": 64, "
      "\"output_length\": 80, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [1089, 1090, 1091, "
      "5]}\n");
  absl::StatusOr<Trace> t = Load(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->block_tokens, 16u);
  EXPECT_EQ(t->refs, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2, 3}));
  ASSERT_EQ(t->timestamp_ms.size(), 2u);
  EXPECT_DOUBLE_EQ(t->timestamp_ms[0], 61114.0);
  EXPECT_DOUBLE_EQ(t->timestamp_ms[1], 62500.0);
}

TEST(TraceReaderTest, ExplicitFormatAndBlockTokensOverrideTheDefaults) {
  TraceLoadOptions options;
  options.format = TraceFormat::kBailian;
  options.block_tokens = 500;
  absl::StatusOr<Trace> t =
      LoadTrace(WriteFile("forced.jsonl",
                          "{\"timestamp\": 2, \"input_length\": 1000, \"hash_ids\": [1, 2]}\n"),
                options);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->block_tokens, 500u);
  EXPECT_DOUBLE_EQ(t->timestamp_ms[0], 2000.0);  // Bailian timestamps are seconds
}

TEST(TraceReaderTest, ParsesFormatNames) {
  EXPECT_EQ(*ParseTraceFormat("auto"), TraceFormat::kAuto);
  EXPECT_EQ(*ParseTraceFormat("mooncake"), TraceFormat::kMooncake);
  EXPECT_EQ(*ParseTraceFormat("bailian"), TraceFormat::kBailian);
  absl::StatusOr<TraceFormat> bad = ParseTraceFormat("csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(Message(bad.status()),
            "unknown trace format \"csv\" (expected auto, mooncake or bailian)");
}

TEST(TraceReaderTest, OtherCompressionsAreNamedAndRefused) {
  for (const auto& [magic, name] : {std::pair<std::string, std::string>{"BZh91AY&SY", "bzip2"},
                                    {std::string("\xfd"
                                                 "7zXZ\0\0",
                                                 8),
                                     "xz"}}) {
    absl::StatusOr<Trace> t = Load(WriteFile("compressed.jsonl", magic));
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_NE(t.status().message().find(name + "-compressed input is not supported"),
              std::string::npos)
        << t.status();
  }
}

TEST(TraceReaderTest, ReadsGzipAndZstdByMagicBytesNotByName) {
  std::string plain = WriteFile("compressed.jsonl", kMooncake);
  Shell("gzip -c " + plain + " > " + TempPath("gz.data"));
  Shell("zstd -q -f -c " + plain + " > " + TempPath("zst.data"));
  for (const char* name : {"gz.data", "zst.data"}) {
    absl::StatusOr<Trace> t = Load(TempPath(name));
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    ExpectMooncakeContent(*t);
  }
}

TEST(TraceReaderTest, ReadsConcatenatedGzipMembersAndZstdFrames) {
  std::string a = WriteFile("part_a.jsonl", Head());
  std::string b = WriteFile("part_b.jsonl", Tail());
  Shell("(gzip -c " + a + "; gzip -c " + b + ") > " + TempPath("multi.gz"));
  Shell("(zstd -q -c " + a + "; zstd -q -c " + b + ") > " + TempPath("multi.zst"));
  for (const char* name : {"multi.gz", "multi.zst"}) {
    absl::StatusOr<Trace> t = Load(TempPath(name));
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    ExpectMooncakeContent(*t);
  }
}

TEST(TraceReaderTest, TruncatedCompressedInputIsAnErrorNamingTheFile) {
  std::string plain = WriteFile("trunc.jsonl", kMooncake);
  Shell("gzip -c " + plain + " | head -c 40 > " + TempPath("trunc.gz"));
  Shell("zstd -q -c " + plain + " | head -c 40 > " + TempPath("trunc.zst"));
  absl::StatusOr<Trace> gz = Load(TempPath("trunc.gz"));
  ASSERT_FALSE(gz.ok());
  EXPECT_EQ(Message(gz.status()), TempPath("trunc.gz") + ": truncated gzip data");
  absl::StatusOr<Trace> zst = Load(TempPath("trunc.zst"));
  ASSERT_FALSE(zst.ok());
  EXPECT_EQ(Message(zst.status()), TempPath("trunc.zst") + ": truncated zstd data");
}

// Replaces stdin with the read end of a pipe fed by a thread, then loads "-".
absl::StatusOr<Trace> LoadFromStdinPipe(const std::string& bytes) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  int saved = dup(STDIN_FILENO);
  dup2(fds[0], STDIN_FILENO);
  close(fds[0]);
  std::thread writer([&] {
    EXPECT_EQ(write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(fds[1]);
  });
  absl::StatusOr<Trace> t = Load("-");
  writer.join();
  dup2(saved, STDIN_FILENO);
  close(saved);
  return t;
}

TEST(TraceReaderTest, ReadsPlainAndGzipFromStdinPipe) {
  ExpectMooncakeContent(*LoadFromStdinPipe(kMooncake));
  std::string plain = WriteFile("stdin.jsonl", kMooncake);
  Shell("gzip -c " + plain + " > " + TempPath("stdin.gz"));
  std::ifstream in(TempPath("stdin.gz"), std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ExpectMooncakeContent(*LoadFromStdinPipe(gz));
}

TEST(TraceReaderTest, ErrorsOnStdinNameStdin) {
  absl::StatusOr<Trace> t = LoadFromStdinPipe("{\"timestamp\": 0}\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(Message(t.status()), "<stdin>:1: field \"input_length\" is missing");
}

TEST(TraceReaderTest, EmptyFileGivesAnEmptyTrace) {
  absl::StatusOr<Trace> t = Load(WriteFile("empty.jsonl", ""));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_requests(), 0u);
  EXPECT_EQ(t->num_refs(), 0u);
  EXPECT_EQ(t->block_tokens, 512u);
}

TEST(TraceReaderTest, BlankLinesCrlfAndMissingFinalNewlineAreFine) {
  std::string text = std::string(kMooncake);
  text.insert(text.find('\n') + 1, "\n   \r\n\t\n");  // blank lines after the first line
  text.pop_back();                                    // no newline at the end
  size_t first_nl = text.find('\n');
  text.insert(first_nl, "\r");
  absl::StatusOr<Trace> t = Load(WriteFile("blank.jsonl", text));
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectMooncakeContent(*t);
}

TEST(TraceReaderTest, MissingFileIsNotFound) {
  absl::StatusOr<Trace> t = Load(TempPath("does_not_exist.jsonl"));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("does_not_exist.jsonl"), std::string::npos);
}

TEST(TraceReaderTest, DirectoryIsInvalidArgument) {
  absl::StatusOr<Trace> t = Load(::testing::TempDir());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

struct BadLine {
  std::string text;
  std::string message;
};

// Every kind of malformed line, on line 2 after a good one, with the exact message.
TEST(TraceReaderTest, MalformedLinesStopWithFileLineAndWhat) {
  const std::vector<BadLine> cases = {
      {"{\"timestamp\": 0, \"input_length\": 512}", "field \"hash_ids\" is missing"},
      {"{\"input_length\": 512, \"hash_ids\": [1]}", "field \"timestamp\" is missing"},
      {"{\"timestamp\": 0, \"hash_ids\": [1]}", "field \"input_length\" is missing"},
      {"{\"timestamp\": 0, \"input_length\": -3, \"hash_ids\": []}",
       "\"input_length\" must be a non-negative integer, got -3"},
      {"{\"timestamp\": 0, \"input_length\": 1.5, \"hash_ids\": [1]}",
       "\"input_length\" must be a non-negative integer, got 1.5"},
      {"{\"timestamp\": 0, \"input_length\": \"512\", \"hash_ids\": [1]}",
       "\"input_length\" must be a non-negative integer, got \"512\""},
      {"{\"timestamp\": 0, \"input_length\": 512, \"output_length\": -1, \"hash_ids\": [1]}",
       "\"output_length\" must be a non-negative integer, got -1"},
      {"{\"timestamp\": -5, \"input_length\": 512, \"hash_ids\": [1]}",
       "\"timestamp\" must be a non-negative number, got -5"},
      {"{\"timestamp\": null, \"input_length\": 512, \"hash_ids\": [1]}",
       "\"timestamp\" must be a non-negative number, got null"},
      {"{\"timestamp\": 0, \"input_length\": 1024, \"hash_ids\": [1, -2]}",
       "\"hash_ids[1]\" must be a non-negative integer, got -2"},
      {"{\"timestamp\": 0, \"input_length\": 1024, \"hash_ids\": [1, 2.5]}",
       "\"hash_ids[1]\" must be a non-negative integer, got 2.5"},
      {"{\"timestamp\": 0, \"input_length\": 512, \"hash_ids\": [\"a\"]}",
       "\"hash_ids[0]\" must be a non-negative integer, got \"a\""},
      {"{\"timestamp\": 0, \"input_length\": 512, \"hash_ids\": 7}",
       "\"hash_ids\" must be an array of non-negative integers, got 7"},
      {"{\"timestamp\": 0, \"input_length\": 512, \"hash_ids\": [1, 2, 3]}",
       "\"hash_ids\" has 3 ids, but \"input_length\" 512 at 512 tokens per block needs 1 "
       "(wrong --format or --block-tokens?)"},
      {"{\"timestamp\": 0, \"input_length\": 5000, \"hash_ids\": [1]}",
       "\"hash_ids\" has 1 ids, but \"input_length\" 5000 at 512 tokens per block needs 9 or 10 "
       "(wrong --format or --block-tokens?)"},
      {"{\"timestamp\": 0, \"input_length\": 99999999999, \"hash_ids\": []}",
       "\"input_length\" 99999999999 is too large (at most 4294967295)"},
      {"{\"timestamp\": 0, \"chat_id\": \"x\", \"input_length\": 512, \"hash_ids\": [1]}",
       "\"chat_id\" must be an integer, got \"x\""},
      {"[1, 2]", "not a JSON object: [1, 2]"},
      {"hello", "not a JSON object: hello"},
      {"{\"timestamp\": 0, \"input_length\": 512, \"hash_ids\": [1]} {}",
       "not valid JSON (unexpected text after the object)"},
  };
  for (const BadLine& c : cases) {
    std::string path = WriteFile("bad.jsonl", Head() + c.text + "\n");
    absl::StatusOr<Trace> t = Load(path);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Message(t.status()), path + ":2: " + c.message) << c.text;
  }
}

TEST(TraceReaderTest, BrokenJsonSaysNotValidJson) {
  for (const char* text : {"{\"timestamp\": 0, \"input_length\": 512, \"hash_ids\": [1,",
                           "{\"timestamp\" 0}", "{\"timestamp\": 0,, \"hash_ids\": []}"}) {
    std::string path = WriteFile("broken.jsonl", std::string("\n") + text + "\n");
    absl::StatusOr<Trace> t = Load(path);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(Message(t.status()).rfind(path + ":2: not valid JSON (", 0), 0u)
        << text << " -> " << t.status().message();
  }
}

TEST(TraceReaderTest, SkipBadSkipsAndCountsMalformedLines) {
  std::string text = Head() + "garbage\n" +
                     "{\"timestamp\": 0, \"input_length\": -1, \"hash_ids\": []}\n" + Tail();
  absl::StatusOr<Trace> t = Load(WriteFile("skip.jsonl", text), /*skip_bad=*/true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->skipped_lines, 2u);
  EXPECT_EQ(t->num_requests(), 3u);
  EXPECT_EQ(t->refs, (std::vector<uint32_t>{0, 1, 0, 1, 2, 3}));
}

TEST(TraceReaderTest, LinesLongerThanTheReadBufferAreRead) {
  std::string line = "{\"timestamp\": 0, \"input_length\": 512000000, \"hash_ids\": [";
  for (int i = 0; i < 1000000; ++i) line += std::to_string(i) + (i + 1 < 1000000 ? "," : "]}\n");
  absl::StatusOr<Trace> t = Load(WriteFile("long.jsonl", line + line));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_refs(), 2000000u);
  EXPECT_EQ(t->num_blocks(), 1000000u);
}

TEST(TraceReaderTest, ReportsProgressEndingAtTheFileSize) {
  std::string path = WriteFile("progress.jsonl", kMooncake);
  uint64_t last_done = 0, last_total = 0;
  TraceLoadOptions options;
  options.on_progress = [&](uint64_t done, uint64_t total) {
    last_done = done;
    last_total = total;
  };
  ASSERT_TRUE(LoadTrace(path, options).ok());
  EXPECT_EQ(last_total, sizeof(kMooncake) - 1);
  EXPECT_EQ(last_done, last_total);
}

TEST(LineReaderTest, DetectsCompressionAndCountsConsumedBytes) {
  std::string plain = WriteFile("lr.jsonl", "a\nb\n");
  Shell("zstd -q -f -c " + plain + " > " + TempPath("lr.zst"));
  absl::StatusOr<std::unique_ptr<LineReader>> r = LineReader::Open(TempPath("lr.zst"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->compression(), Compression::kZstd);
  std::string_view line;
  std::vector<std::string> lines;
  while ((*r)->Next(&line)) lines.emplace_back(line);
  EXPECT_TRUE((*r)->status().ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*r)->bytes_consumed(), (*r)->total_bytes());
}

// Dense small ids, sparse 64-bit hashes, and small ids first seen while they were still "sparse"
// (later covered by the growing array) must all keep one id each, numbered in first-seen order.
TEST(TraceInternerTest, MatchesAReferenceMapOnMixedDenseAndSparseHashes) {
  TraceInterner interner(0);
  std::vector<uint64_t> hashes;
  std::map<uint64_t, uint32_t> reference;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 400000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    uint64_t hash = x % 4 == 0 ? x : (x >> 8) % (i % 3 == 0 ? 600000 : 1000 + i);
    auto [it, inserted] = reference.try_emplace(hash, static_cast<uint32_t>(reference.size()));
    ASSERT_EQ(interner.Intern(hash, &hashes), it->second) << "hash " << hash << " at step " << i;
  }
  ASSERT_EQ(hashes.size(), reference.size());
  for (const auto& [hash, id] : reference) EXPECT_EQ(hashes[id], hash);
}

TEST(TraceReaderTest, RealMooncakeTraceMatchesItsPublishedCounts) {
  std::string path = KVTIER_SOURCE_DIR "/../shared/traces/mooncake_conversation.jsonl";
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << "real trace absent: " << path;
  absl::StatusOr<Trace> t = Load(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_requests(), 12031u);
  EXPECT_EQ(t->num_refs(), 288500u);
  EXPECT_EQ(t->num_blocks(), 182790u);
  EXPECT_EQ(t->block_tokens, 512u);
}

}  // namespace
}  // namespace kvtier::replay
