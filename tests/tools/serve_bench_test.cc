// `kvtier serve-bench` as an operator runs it: the real kvtier binary replaying the first records
// of the real Mooncake trace against a real `kvtier serve` (a random-weight Qwen3-architecture
// model on the CPU backend, as serve_cli_test makes it; alone, and on a real kvtierd), its JSON
// report checked against the trace and against the server's own /metrics; errors (a server
// answering 404, a stream cut mid-way by a stand-in server in this process) counted by kind, never
// dropped; a malformed trace line named by file:line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon/kvtierd_process.h"
#include "tests/tools/serve_test_util.h"

namespace kvtier::serve_test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int kContext = 512;
constexpr const char* kModelName = "bench-model";

std::string Binary() { return std::string(KVTIER_BINARY_DIR) + "/tools/kvtier"; }
std::string RealTrace() {
  return std::string(KVTIER_SOURCE_DIR) + "/../shared/traces/mooncake_conversation.jsonl";
}
fs::path TempRoot() {
  return fs::path(::testing::TempDir()) / ("kvtier_serve_bench_" + std::to_string(::getpid()));
}

struct ToolRun {
  int exit_code = -1;
  std::string out, err;
};

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `kvtier serve-bench ARGS`, its exit code, stdout and stderr.
ToolRun RunBench(const std::vector<std::string>& args) {
  std::string cmd = Binary() + " serve-bench";
  for (const std::string& a : args) cmd += " '" + a + "'";
  const fs::path out = TempRoot() / "out.txt", err = TempRoot() / "err.txt";
  cmd += " >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  ToolRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  return r;
}

// The first `n` records of the real trace, as written.
std::vector<Json> FirstRecords(size_t n) {
  std::ifstream in(RealTrace());
  std::vector<Json> records;
  std::string line;
  while (records.size() < n && std::getline(in, line)) records.push_back(Json::parse(line));
  return records;
}

class ServeBenchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::remove_all(TempRoot());
    fs::create_directories(TempRoot());
    // The same model serve_cli_test makes (made once per build tree, renamed into place).
    model_ = std::string(KVTIER_BINARY_DIR) + "/tests/tools/serve_cli_qwen3_random";
    if (!fs::exists(fs::path(model_) / "model.safetensors")) {
      const fs::path tokenizer = fs::path(KVTIER_SOURCE_DIR) / "third_party/tokenizers/qwen3";
      const fs::path mine = model_ + ".tmp" + std::to_string(::getpid());
      const std::string make = Binary() + " make-model --out '" + mine.string() +
                               "' --tokenizer '" + tokenizer.string() +
                               "' --arch qwen3 --layers 2 --hidden 64 --max-position " +
                               std::to_string(kContext) + " >/dev/null";
      if (std::system(make.c_str()) != 0) return;
      std::error_code ec;
      fs::rename(mine, model_, ec);
      fs::remove_all(mine, ec);
    }
    if (!fs::exists(fs::path(model_) / "config.json")) return;
    vocab_ = Json::parse(ReadAll(fs::path(model_) / "config.json"))["vocab_size"].get<int>();
    server_ = new ServerProcess();
    started_ = server_->Start(Binary(), {"serve", "--model", model_, "--device", "cpu", "--port",
                                         "0", "--served-model-name", kModelName});
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    fs::remove_all(TempRoot());
  }

  void RequireServer() {
    ASSERT_GT(vocab_, 0) << "make-model failed (is third_party/tokenizers/qwen3 there? "
                            "tools/setup.sh fetches it)";
    ASSERT_TRUE(started_) << server_->output();
  }

  static std::string Port() { return std::to_string(server_->port()); }

  static inline std::string model_;
  static inline int vocab_ = 0;
  static inline ServerProcess* server_ = nullptr;
  static inline bool started_ = false;
};

// One request at a time, so every request after the first finds the trace's shared first block
// (hash id 0, the system prompt every conversation starts with) in the prefix cache: the cached
// tokens are exactly what an infinite cache would give, and the server's /metrics agree with the
// usage the client summed. Each test has a --seed of its own, so the server's cache holds no
// block of another test's prompts.
TEST_F(ServeBenchTest, ReplaysTheFirstRecordsOfTheRealTrace) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  RequireServer();
  constexpr int kRequests = 12, kBlock = 16, kMaxOut = 4;
  const ToolRun run = RunBench({"--trace",
                                RealTrace(),
                                "--port",
                                Port(),
                                "--vocab-size",
                                std::to_string(vocab_),
                                "--max-requests",
                                std::to_string(kRequests),
                                "--block-tokens",
                                std::to_string(kBlock),
                                "--max-output-tokens",
                                std::to_string(kMaxOut),
                                "--time-scale",
                                "0",
                                "--max-in-flight",
                                "1",
                                "--seed",
                                "1",
                                "--progress",
                                "0",
                                "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const Json r = Json::parse(run.out);
  // What the trace says the run must hold.
  int64_t prompt = 0, completion = 0, truncated = 0;
  for (const Json& rec : FirstRecords(kRequests)) {
    const int64_t out = std::min<int64_t>(rec["output_length"].get<int64_t>(), kMaxOut);
    const int64_t full = (rec["input_length"].get<int64_t>() * kBlock + 511) / 512;
    const int64_t sent = std::min<int64_t>(full, kContext - out);
    prompt += sent;
    completion += out;
    truncated += sent < full;
  }
  EXPECT_EQ(r["requests"], kRequests);
  EXPECT_EQ(r["ok"], kRequests);
  EXPECT_EQ(r["failed"], 0);
  EXPECT_EQ(r["truncated"], truncated);
  EXPECT_GT(truncated, 0);  // the trace's long prompts do not fit a 512-token context
  EXPECT_EQ(r["prompt_tokens"], prompt);
  EXPECT_EQ(r["completion_tokens"], completion);
  EXPECT_EQ(r["ttft_s"]["n"], kRequests);
  EXPECT_EQ(r["model"], kModelName);
  EXPECT_EQ(r["max_model_len"], kContext);
  // Every request after the first shares exactly the first block with the ones before it.
  EXPECT_EQ(r["ideal_cached_tokens"], (kRequests - 1) * kBlock);
  EXPECT_EQ(r["cached_tokens"], (kRequests - 1) * kBlock);
  // The server counted the same: prompt tokens by source add up to the prompts, the computed
  // ones to the prompts less the cached ones (whatever sources the server reports).
  ASSERT_TRUE(r["metrics"].is_object()) << run.out;
  int64_t by_source = 0;
  for (const auto& [source, n] : r["metrics"]["prompt_tokens_by_source"].items())
    by_source += n.get<int64_t>();
  EXPECT_EQ(by_source, prompt);
  EXPECT_EQ(r["metrics"]["prompt_tokens"], prompt);
  EXPECT_EQ(r["metrics"]["prompt_tokens_by_source"]["computed"], prompt - (kRequests - 1) * kBlock);
  EXPECT_EQ(r["metrics"]["series"]["kvtier_serve_generation_tokens_total"], completion);
}

// The table names the same figures for a person.
TEST_F(ServeBenchTest, PrintsATableWithLatenciesAndCachedTokens) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  RequireServer();
  const ToolRun run =
      RunBench({"--trace", RealTrace(), "--port", Port(), "--vocab-size", std::to_string(vocab_),
                "--max-requests", "3", "--block-tokens", "16", "--max-output-tokens", "3",
                "--time-scale", "0", "--seed", "2", "--progress", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const char* want :
       {"3 sent, 3 ok, 0 failed", "TTFT", "inter-token", "requests/s", "output tokens/s", "cached",
        "an infinite cache", "prompt tokens by source"}) {
    EXPECT_NE(run.out.find(want), std::string::npos) << want << " not in:\n" << run.out;
  }
}

// With --daemon the KV lives in kvtierd's T1: a second server on the same daemon replaying the
// same records finds every full block the first one computed, beyond the cold-cache ceiling, and
// /metrics counts them as served from t1 -- the docs' with/without-tiers figure in miniature.
TEST_F(ServeBenchTest, OnADaemonASecondServerFindsTheFirstServersBlocksInT1) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  RequireServer();
  constexpr int kRequests = 12, kBlock = 16, kMaxOut = 2;
  const Json config = Json::parse(ReadAll(fs::path(model_) / "config.json"));
  // One block's fp32 K/V: tokens x layers x (K, V) x kv heads x head_dim x 4 bytes.
  const int64_t slot_bytes = int64_t{kBlock} * config["num_hidden_layers"].get<int64_t>() * 2 *
                             config["num_key_value_heads"].get<int64_t>() *
                             config["head_dim"].get<int64_t>() * 4;
  kvtier::testing::TempDir dir;
  auto daemon = kvtier::testing::KvtierdProcess::Start(
      dir.path(), {"--t1.capacity_bytes", "8MiB", "--t1.slot_bytes", std::to_string(slot_bytes),
                   "--t1.touch_threads", "1", "--t1.huge_pages", "off", "--t2.enabled", "false"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  Json runs[2];
  for (Json& run : runs) {
    ServerProcess server;
    ASSERT_TRUE(server.Start(
        Binary(), {"serve", "--model", model_, "--device", "cpu", "--port", "0",
                   "--served-model-name", kModelName, "--daemon", (*daemon)->socket_path()}))
        << server.output();
    const ToolRun bench = RunBench({"--trace",
                                    RealTrace(),
                                    "--port",
                                    std::to_string(server.port()),
                                    "--vocab-size",
                                    std::to_string(vocab_),
                                    "--max-requests",
                                    std::to_string(kRequests),
                                    "--block-tokens",
                                    std::to_string(kBlock),
                                    "--max-output-tokens",
                                    std::to_string(kMaxOut),
                                    "--time-scale",
                                    "0",
                                    "--max-in-flight",
                                    "1",
                                    "--seed",
                                    "5",
                                    "--progress",
                                    "0",
                                    "--json"});
    ASSERT_EQ(bench.exit_code, 0) << bench.out << bench.err;
    run = Json::parse(bench.out);
    EXPECT_EQ(server.Stop(), 0) << server.output();
  }
  const int64_t prompt = runs[1]["prompt_tokens"];
  EXPECT_EQ(runs[0]["prompt_tokens"], prompt);
  EXPECT_EQ(runs[0]["cached_tokens"], (kRequests - 1) * kBlock);  // the shared first block
  EXPECT_EQ(runs[1]["ideal_cached_tokens"], (kRequests - 1) * kBlock);
  // Every full block but the one holding a prompt's last token, which is always computed.
  EXPECT_GE(runs[1]["cached_tokens"].get<int64_t>(), prompt - kRequests * kBlock);
  for (const Json& run : runs) {
    ASSERT_TRUE(run["metrics"].is_object()) << run.dump();
    const Json& by_source = run["metrics"]["prompt_tokens_by_source"];
    EXPECT_EQ(by_source.value("t1", 0.0), run["cached_tokens"].get<double>()) << by_source;
    EXPECT_EQ(by_source.value("computed", 0.0),
              run["prompt_tokens"].get<double>() - run["cached_tokens"].get<double>());
  }
}

// --duration keeps the records due in its first seconds (after --time-scale): the first 40
// records arrive at 0, 3, 6 and 9 s of the trace, so at a thousandth of the speed a 5 ms run holds
// the 26 of 0 and 3 s. --requests-out has one line per request sent, in trace order.
TEST_F(ServeBenchTest, DurationKeepsTheRecordsDueInTimeAndEachRequestGetsALine) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  RequireServer();
  size_t due = 0;
  for (const Json& rec : FirstRecords(40)) due += rec["timestamp"].get<double>() <= 5000;
  ASSERT_EQ(due, 26u);
  const fs::path lines = TempRoot() / "requests.jsonl";
  const ToolRun run = RunBench({"--trace",
                                RealTrace(),
                                "--port",
                                Port(),
                                "--vocab-size",
                                std::to_string(vocab_),
                                "--max-requests",
                                "40",
                                "--time-scale",
                                "0.001",
                                "--duration",
                                "0.005",
                                "--block-tokens",
                                "4",
                                "--max-output-tokens",
                                "1",
                                "--seed",
                                "3",
                                "--progress",
                                "0",
                                "--json",
                                "--requests-out",
                                lines.string()});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const Json r = Json::parse(run.out);
  EXPECT_EQ(r["requests"], due);
  EXPECT_EQ(r["ok"], due);
  EXPECT_DOUBLE_EQ(r["schedule_span_s"].get<double>(), 0.003);
  std::ifstream in(lines);
  std::string line;
  size_t n = 0;
  for (; std::getline(in, line); ++n) {
    const Json q = Json::parse(line);
    EXPECT_EQ(q["line"], n + 1);
    EXPECT_EQ(q["http_status"], 200);
    EXPECT_EQ(q["completion_tokens"], 1);
    EXPECT_EQ(q["error_kind"], "");
  }
  EXPECT_EQ(n, due);
}

// --sample-conversations keeps whole conversations: of the first 300 records (21 of which are a
// later turn of an earlier one), some but not all are sent, two records of one conversation (the
// same second hash id) are both sent or neither, and some conversation is sent with its later
// turns.
TEST_F(ServeBenchTest, SampledConversationsAreKeptWhole) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  RequireServer();
  const std::vector<Json> records = FirstRecords(300);
  const fs::path lines = TempRoot() / "sampled.jsonl";
  const ToolRun run = RunBench({"--trace",
                                RealTrace(),
                                "--port",
                                Port(),
                                "--vocab-size",
                                std::to_string(vocab_),
                                "--max-requests",
                                "300",
                                "--sample-conversations",
                                "3",
                                "--time-scale",
                                "0",
                                "--max-in-flight",
                                "8",
                                "--block-tokens",
                                "2",
                                "--max-output-tokens",
                                "1",
                                "--progress",
                                "0",
                                "--json",
                                "--requests-out",
                                lines.string()});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::ifstream in(lines);
  std::set<uint64_t> sent_lines;
  for (std::string line; std::getline(in, line);) {
    sent_lines.insert(Json::parse(line)["line"].get<uint64_t>());
  }
  EXPECT_GT(sent_lines.size(), 0u);
  EXPECT_LT(sent_lines.size(), records.size());
  EXPECT_EQ(Json::parse(run.out)["requests"], sent_lines.size());
  std::map<uint64_t, bool> conversations;  // second hash id -> sent
  int later_turns_sent = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& ids = records[i]["hash_ids"];
    const uint64_t conversation = ids[ids.size() > 1 ? 1 : 0].get<uint64_t>();
    const bool sent = sent_lines.count(i + 1) > 0;
    auto [it, first] = conversations.emplace(conversation, sent);
    if (!first) {
      EXPECT_EQ(it->second, sent) << "trace line " << i + 1;
      later_turns_sent += sent;
    }
  }
  EXPECT_GT(later_turns_sent, 0);
}

// A server that refuses every request (an unknown model: 404): each is counted as an error of its
// kind, the exit code says some failed, and the first errors are shown naming the trace line.
TEST_F(ServeBenchTest, RefusedRequestsAreCountedByKind) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  RequireServer();
  const ToolRun run =
      RunBench({"--trace", RealTrace(), "--port", Port(), "--vocab-size", std::to_string(vocab_),
                "--model", "no-such-model", "--max-requests", "5", "--block-tokens", "16",
                "--max-output-tokens", "2", "--time-scale", "0", "--progress", "0", "--json"});
  ASSERT_EQ(run.exit_code, 3) << run.out << run.err;
  const Json r = Json::parse(run.out);
  EXPECT_EQ(r["requests"], 5);
  EXPECT_EQ(r["ok"], 0);
  EXPECT_EQ(r["errors"]["http 404"], 5);
  ASSERT_FALSE(r["first_errors"].empty());
  EXPECT_NE(r["first_errors"][0].get<std::string>().find("trace line 1"), std::string::npos)
      << r["first_errors"][0];
}

// A stand-in server in this process: /v1/models lists a model, /metrics is 404 (a server without
// metrics), and the completion streams are the given ones in turn (connections are served one at a
// time, so each is used equally often whatever order the requests come in).
class StandInServer {
 public:
  struct Stream {
    std::string events;  // SSE bytes
    bool ends = true;    // false: the connection closes mid-body (no last chunk)
  };

  explicit StandInServer(std::vector<Stream> streams)
      : streams_(std::move(streams)),
        acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this] { Serve(); });
  }
  ~StandInServer() {
    beast::error_code ignored;
    stopping_ = true;
    // Wake the blocked accept with a connection of our own.
    tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

  static constexpr const char* kContent =
      "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n";
  static constexpr const char* kLast =
      "data: {\"choices\":[{\"index\":0,\"text\":\"y\",\"finish_reason\":\"length\"}]}\n\n";
  static constexpr const char* kUsage =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2,"
      "\"total_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n";
  static constexpr const char* kDone = "data: [DONE]\n\n";

 private:
  static std::string Plain(const std::string& status, const std::string& body) {
    return "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
  }

  std::string Completion() {
    const Stream& s = streams_[next_++ % streams_.size()];
    std::ostringstream out;
    out << "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"
        << "\r\n\r\n"
        << std::hex << s.events.size() << "\r\n"
        << s.events << "\r\n";
    if (s.ends) out << "0\r\n\r\n";
    return out.str();
  }

  void Serve() {
    while (!stopping_) {
      tcp::socket s(io_);
      beast::error_code ec;
      acceptor_.accept(s, ec);
      if (ec || stopping_) return;
      beast::flat_buffer buffer;
      http::request<http::string_body> req;
      http::read(s, buffer, req, ec);
      if (ec) continue;
      const std::string answer =
          req.target() == "/v1/models"
              ? Plain("200 OK", R"({"object":"list","data":[{"id":"m","max_model_len":4096}]})")
          : req.target() == "/v1/completions" ? Completion()
                                              : Plain("404 Not Found", "");
      asio::write(s, asio::buffer(answer), ec);
      s.shutdown(tcp::socket::shutdown_both, ec);
    }
  }

  const std::vector<Stream> streams_;
  size_t next_ = 0;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Every way a stream can go wrong is counted as its own kind (and a whole one as a success).
TEST_F(ServeBenchTest, EveryKindOfBadStreamIsCountedAsItsKind) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  using S = StandInServer;
  const std::string content = S::kContent, last = S::kLast, usage = S::kUsage, done = S::kDone;
  const std::string error = "data: {\"error\":{\"message\":\"engine failed\"}}\n\n";
  StandInServer server({
      {content + last + usage + done},                   // whole
      {content, /*ends=*/false},                         // cut
      {content + error + done},                          // an error event
      {content + last + done},                           // no usage chunk
      {content + "event: nonsense\n\n" + done},          // not a data event
      {content + "data: {\"x\": \"\xff\"}\n\n" + done},  // not UTF-8: not JSON, and the
                                                         // report quoting it is still JSON
  });
  const ToolRun run =
      RunBench({"--trace", RealTrace(), "--port", std::to_string(server.port()), "--vocab-size",
                "1000", "--max-requests", "12", "--block-tokens", "4", "--time-scale", "0",
                "--max-in-flight", "1", "--progress", "0", "--json"});
  ASSERT_EQ(run.exit_code, 3) << run.out << run.err;
  const Json r = Json::parse(run.out);
  EXPECT_EQ(r["requests"], 12);
  EXPECT_EQ(r["ok"], 2);
  EXPECT_EQ(r["errors"],
            Json({{"broken stream", 2}, {"error event", 2}, {"no usage", 2}, {"bad event", 4}}));
  EXPECT_EQ(r["completion_tokens"], 4);  // the two whole streams' usage
  EXPECT_EQ(r["cached_tokens"], 8);
  EXPECT_EQ(r["ttft_s"]["n"], 2);
  // One at a time, request i met stream i % 6: the first errors shown are requests 1 to 5.
  ASSERT_EQ(r["first_errors"].size(), 5u);
  EXPECT_NE(r["first_errors"][4].get<std::string>().find("request 5 (trace line 6): bad event"),
            std::string::npos)
      << r["first_errors"][4];
}

// The usage's counts are checked before use: kvtier serve's kvtier_cached_from is kept per
// request (--requests-out), and a count of the wrong type, negative or past 2^40 counts as missing
// (a stream whose completion_tokens is unusable has no usage), never as a crash.
TEST_F(ServeBenchTest, UsageCountsAreKeptByTierAndBadOnesCountAsMissing) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  using S = StandInServer;
  const std::string content = S::kContent, last = S::kLast, done = S::kDone;
  const std::string by_tier =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2,"
      "\"prompt_tokens_details\":{\"cached_tokens\":4,\"kvtier_cached_from\":{\"engine\":0,"
      "\"t0\":1,\"t1\":2,\"t2\":1,\"t3\":0}},\"kvtier_preemptions\":3}}\n\n";
  const std::string wrong_types =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":\"8\",\"completion_tokens\":2,"
      "\"prompt_tokens_details\":{\"cached_tokens\":1e300,\"kvtier_cached_from\":{\"t1\":"
      "[1],\"t2\":18446744073709551615,\"t0\":-5,\"t3\":1099511627777}},"
      "\"kvtier_preemptions\":-1}}\n\n";
  const std::string unusable =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":-0.5,"
      "\"prompt_tokens_details\":\"none\"}}\n\n";
  StandInServer server({{content + last + by_tier + done},
                        {content + last + wrong_types + done},
                        {content + last + unusable + done}});
  const std::string lines = (TempRoot() / "by_tier.jsonl").string();
  const ToolRun run =
      RunBench({"--trace", RealTrace(), "--port", std::to_string(server.port()), "--vocab-size",
                "1000", "--max-requests", "3", "--block-tokens", "4", "--time-scale", "0",
                "--max-in-flight", "1", "--progress", "0", "--json", "--requests-out", lines});
  ASSERT_EQ(run.exit_code, 3) << run.out << run.err;
  const Json r = Json::parse(run.out);
  EXPECT_EQ(r["ok"], 2);
  EXPECT_EQ(r["errors"], Json({{"no usage", 1}}));
  EXPECT_EQ(r["cached_tokens"], 4);  // the second stream's 1e300 is no count
  std::vector<Json> req;
  std::istringstream in(ReadAll(lines));
  for (std::string line; std::getline(in, line);) req.push_back(Json::parse(line));
  ASSERT_EQ(req.size(), 3u);
  EXPECT_EQ(req[0]["cached_from"],
            Json({{"engine", 0}, {"t0", 1}, {"t1", 2}, {"t2", 1}, {"t3", 0}}));
  EXPECT_EQ(req[1]["cached_from"],
            Json({{"engine", 0}, {"t0", 0}, {"t1", 0}, {"t2", 0}, {"t3", 0}}));
  EXPECT_EQ(req[1]["cached_tokens"], 0);
  EXPECT_EQ(req[0]["preemptions"], 3);
  EXPECT_TRUE(req[1]["preemptions"].is_null()) << "a negative count is no count";
  EXPECT_TRUE(req[2]["preemptions"].is_null()) << "none given";
}

TEST_F(ServeBenchTest, BrokenStreamsAreCountedAndMissingMetricsAreSaidNotFatal) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  StandInServer server({{StandInServer::kContent, /*ends=*/false}});
  const ToolRun run = RunBench({"--trace", RealTrace(), "--port", std::to_string(server.port()),
                                "--vocab-size", "1000", "--max-requests", "4", "--block-tokens",
                                "4", "--time-scale", "0", "--progress", "0", "--json"});
  ASSERT_EQ(run.exit_code, 3) << run.out << run.err;
  const Json r = Json::parse(run.out);
  EXPECT_EQ(r["requests"], 4);
  EXPECT_EQ(r["ok"], 0);
  EXPECT_EQ(r["errors"]["broken stream"], 4);
  EXPECT_TRUE(r["metrics"].is_null());
  EXPECT_NE(r["metrics_error"].get<std::string>().find("404"), std::string::npos)
      << r["metrics_error"];
}

// A server that takes the connection and never answers: /v1/models times out after
// --read-timeout and the error says so (the run never hangs).
TEST_F(ServeBenchTest, ASilentServerIsAnErrorAfterTheReadTimeout) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  asio::io_context io;
  tcp::acceptor silent(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));  // never accepts
  const ToolRun run =
      RunBench({"--trace", RealTrace(), "--port", std::to_string(silent.local_endpoint().port()),
                "--vocab-size", "1000", "--max-requests", "1", "--read-timeout", "1"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("/v1/models: "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("timeout"), std::string::npos) << run.err;
}

// Hostile input: the line that is wrong is named, file and line, before anything is sent.
TEST_F(ServeBenchTest, ABadTraceLineIsNamedByFileAndLine) {
  const fs::path trace = TempRoot() / "bad.jsonl";
  {
    std::ofstream out(trace);
    out << R"({"timestamp": 0, "input_length": 20, "output_length": 2, "hash_ids": [1]})"
        << "\n"
        << "\n"
        << R"({"timestamp": 5, "input_length": 20, "output_length": "two", "hash_ids": [1]})"
        << "\n";
  }
  ToolRun run = RunBench({"--trace", trace.string(), "--port", "1", "--vocab-size", "100"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(trace.string() + ":3: \"output_length\" must be a non-negative integer"),
            std::string::npos)
      << run.err;
  {
    std::ofstream out(trace);
    out << R"({"timestamp": 0, "input_length": 2000, "output_length": 2, "hash_ids": [1]})"
        << "\n";
  }
  run = RunBench({"--trace", trace.string(), "--port", "1", "--vocab-size", "100"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(trace.string() + ":1: \"hash_ids\" has 1 ids"), std::string::npos)
      << run.err;
}

// /v1/models does not say the vocabulary's size: the error says which flag to pass.
TEST_F(ServeBenchTest, WithoutAVocabularySizeTheErrorNamesTheFlag) {
  if (!fs::exists(RealTrace())) GTEST_SKIP() << "real trace absent: " << RealTrace();
  StandInServer server({{StandInServer::kDone}});
  const ToolRun run = RunBench(
      {"--trace", RealTrace(), "--port", std::to_string(server.port()), "--max-requests", "1"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("--vocab-size"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace kvtier::serve_test
