// `kvtier serve` as an OpenAI client meets it: the real kvtier binary serving a random-weight
// Qwen3-architecture model (written by make-model with the real Qwen3 tokenizer,
// third_party/tokenizers/qwen3, fetched by tools/setup.sh), spoken to over real TCP connections by
// a Beast client. The greedy text is checked against the engine run in this process on the same
// model (the server adds nothing and loses nothing); streams are checked event by event; stop
// strings (one split across two tokens), the prefix cache's cached_tokens, every error status, a
// client leaving mid-stream and the concurrency limit are checked through the API and /metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/chat_template.h"
#include "engine/cpu_backend.h"
#include "engine/cpu_model.h"
#include "engine/llm_engine.h"
#include "engine/stream_decoder.h"
#include "engine/tokenizer.h"
#include "tests/daemon/kvtierd_process.h"
#include "tests/tools/serve_test_util.h"

namespace kvtier::serve_test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int kContext = 512;
constexpr int kMaxConcurrent = 2;
constexpr const char* kModelName = "test-model";

fs::path TempRoot() {
  return fs::path(::testing::TempDir()) / ("kvtier_serve_cli_" + std::to_string(::getpid()));
}

std::string Binary() { return std::string(KVTIER_BINARY_DIR) + "/tools/kvtier"; }

// The events of an SSE body: the text after "data: " of each "data: ...\n\n" block; a block in any
// other shape is returned as "MALFORMED: ..." so the test shows it.
std::vector<std::string> Events(const std::string& body) {
  std::vector<std::string> events;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    const std::string block =
        body.substr(at, end == std::string::npos ? std::string::npos : end - at);
    events.push_back(block.rfind("data: ", 0) == 0 && end != std::string::npos
                         ? block.substr(6)
                         : "MALFORMED: " + block);
    if (end == std::string::npos) break;
    at = end + 2;
  }
  return events;
}

// The value of an unlabelled (or exactly labelled) series in a Prometheus text body; -1 if absent.
double Metric(const std::string& text, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const size_t at = ("\n" + text).find(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size() - 1));
}

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::remove_all(TempRoot());
    fs::create_directories(TempRoot());
    // ctest runs each test in a process of its own: the model is made once per build tree, in a
    // directory of this process's renamed into place (a concurrent process's copy is as good).
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
    made_ = fs::exists(fs::path(model_) / "model.safetensors");
    if (!made_) return;
    server_ = new ServerProcess();
    started_ = server_->Start(Binary(), {"serve", "--model", model_, "--device", "cpu", "--port",
                                         "0", "--served-model-name", kModelName, "--max-concurrent",
                                         std::to_string(kMaxConcurrent), "--max-body-bytes",
                                         "65536", "--idle-timeout", "2",
                                         // generous: a drain must not race a slow (ASan) run
                                         "--drain-timeout", "600"});
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    fs::remove_all(TempRoot());
  }

  void SetUp() override {
    ASSERT_TRUE(fs::exists(fs::path(KVTIER_SOURCE_DIR) / "third_party/tokenizers/qwen3"))
        << "third_party/tokenizers/qwen3 is missing: run tools/setup.sh";
    ASSERT_TRUE(made_) << "make-model failed";
    ASSERT_TRUE(started_) << server_->output();
  }

  static uint16_t port() { return server_->port(); }

  // The engine in this process, on the same model: the text `prompt` generates greedily, and the
  // text of each token (special tokens skipped, as the server does).
  static std::vector<std::string> EnginePieces(const std::vector<int32_t>& prompt, int max_tokens) {
    auto model = engine::CpuModel::Load(model_);
    EXPECT_TRUE(model.ok()) << model.status();
    auto tokenizer = engine::Tokenizer::Load(model_);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    auto backend = std::make_unique<engine::CpuBackend>(**model, 16, 64);
    auto llm = engine::LlmEngine::Create(std::move(backend), engine::EngineOptions{});
    EXPECT_TRUE(llm.ok()) << llm.status();
    engine::RequestOptions options;
    options.max_tokens = max_tokens;
    options.ignore_eos = true;
    EXPECT_TRUE((*llm)->Add(prompt, options).ok());
    auto done = (*llm)->RunUntilIdle();
    EXPECT_TRUE(done.ok()) << done.status();
    engine::StreamDecoder decoder(**tokenizer, /*skip_special_tokens=*/true);
    std::vector<std::string> pieces;
    for (int32_t t : (*done)[0].tokens) pieces.push_back(decoder.Push(t));
    pieces.back() += decoder.Finish();
    return pieces;
  }

  static std::vector<int32_t> Encode(const std::string& text, bool chat) {
    auto tokenizer = engine::Tokenizer::Load(model_);
    std::string rendered = text;
    if (chat) {
      auto tmpl = engine::ChatTemplate::FromTokenizer(**tokenizer);
      rendered = *tmpl->Render(nlohmann::ordered_json{{{"role", "user"}, {"content", text}}},
                               engine::ChatOptions{});
    }
    auto ids = (*tokenizer)->Encode(rendered, /*add_special_tokens=*/!chat);
    return std::vector<int32_t>(ids->begin(), ids->end());
  }

  static std::string Joined(const std::vector<std::string>& pieces) {
    std::string s;
    for (const std::string& p : pieces) s += p;
    return s;
  }

  static Json Completion(const std::string& prompt, int max_tokens, Json extra = Json::object()) {
    Json body = {{"model", kModelName},
                 {"prompt", prompt},
                 {"max_tokens", max_tokens},
                 {"temperature", 0},
                 {"ignore_eos", true}};
    body.update(extra);
    return body;
  }

  // Waits until no request runs or waits in the engine (bounded; fails the test if it never does).
  static std::string WaitIdle() {
    std::string text;
    for (int i = 0; i < 3000; ++i) {
      text = Send(port(), http::verb::get, "/metrics").body;
      if (Metric(text, "kvtier_serve_requests_running") == 0 &&
          Metric(text, "kvtier_serve_requests_waiting") == 0) {
        return text;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "requests still in the engine:\n" << text;
    return text;
  }

  // Requests that left the engine (finished or cancelled) so far.
  static double Ended(const std::string& metrics) {
    double n = 0;
    for (const char* outcome : {"stop", "length", "cancelled", "failed"}) {
      n += Metric(metrics, std::string("kvtier_serve_requests_total{outcome=\"") + outcome + "\"}");
    }
    return n;
  }

  // Waits until `n` requests have left the engine, then until none runs or waits (bounded).
  static std::string WaitEnded(double n) {
    for (int i = 0; i < 3000; ++i) {
      if (Ended(Send(port(), http::verb::get, "/metrics").body) >= n) return WaitIdle();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "fewer than " << n << " requests ended";
    return WaitIdle();
  }

  static inline std::string model_;
  static inline bool made_ = false, started_ = false;
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(ServeTest, ListsTheModelAndIsHealthy) {
  const Reply models = Send(port(), http::verb::get, "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  const Json j = Json::parse(models.body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], kModelName);
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["max_model_len"], kContext);
  auto model = engine::CpuModel::Load(model_);  // what a client makes token-id prompts within
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(j["data"][0]["vocab_size"], (*model)->config().vocab_size);
  EXPECT_EQ(Send(port(), http::verb::get, "/health").status, 200);
}

TEST_F(ServeTest, GreedyCompletionIsTheEnginesText) {
  const std::string prompt = "The quick brown fox";
  const std::string expected = Joined(EnginePieces(Encode(prompt, false), 12));
  const Reply r = Post(port(), "/v1/completions", Completion(prompt, 12).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], kModelName);
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["text"], expected);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], Encode(prompt, false).size());
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["total_tokens"], Encode(prompt, false).size() + 12);
}

TEST_F(ServeTest, TokenIdPromptIsTheSameAsItsText) {
  const std::vector<int32_t> ids = Encode("Token ids in, text out", false);
  const Reply text =
      Post(port(), "/v1/completions", Completion("Token ids in, text out", 6).dump());
  Json body = Completion("", 6);
  body["prompt"] = ids;
  const Reply tokens = Post(port(), "/v1/completions", body.dump());
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_EQ(Json::parse(tokens.body)["choices"][0]["text"],
            Json::parse(text.body)["choices"][0]["text"]);
}

TEST_F(ServeTest, ChatAppliesTheTemplateAndStreamsTheSameText) {
  const std::string user = "Say something random";
  const std::string expected = Joined(EnginePieces(Encode(user, true), 10));
  Json body = {{"model", kModelName},
               {"messages", {{{"role", "user"}, {"content", user}}}},
               {"max_completion_tokens", 10},
               {"temperature", 0},
               {"ignore_eos", true}};
  const Reply whole = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json j = Json::parse(whole.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], expected);

  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const Reply stream = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(stream.status, 200) << stream.body;
  EXPECT_EQ(stream.content_type, "text/event-stream");
  const std::vector<std::string> events = Events(stream.body);
  ASSERT_GE(events.size(), 4u) << stream.body;
  EXPECT_EQ(events.back(), "[DONE]");
  const Json first = Json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const Json e = Json::parse(events[i]);
    EXPECT_TRUE(e["usage"].is_null());
    const Json& delta = e["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
    EXPECT_EQ(e["choices"][0]["finish_reason"].is_null(), i + 3 < events.size()) << events[i];
  }
  EXPECT_EQ(text, expected);
  const Json usage = Json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 10);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], Encode(user, true).size());
}

TEST_F(ServeTest, CompletionStreamFramesEveryEventAndEndsWithDone) {
  const std::string prompt = "Streaming, one token at a time";
  const std::string expected = Joined(EnginePieces(Encode(prompt, false), 8));
  const Reply r = Post(port(), "/v1/completions", Completion(prompt, 8, {{"stream", true}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.transfer_encoding, "chunked");
  const std::vector<std::string> events = Events(r.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json e = Json::parse(events[i]);  // throws (fails) on a malformed event
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_FALSE(e.contains("usage"));  // not asked for
    text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(Json::parse(events[events.size() - 2])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(text, expected);
}

// Every stream ends, however the engine's tokens and the session's writes interleave: a token
// that arrives while the session is writing must wake it afterwards (a wake-up lost there left a
// stream waiting forever, about one run in 25 of this suite under load).
TEST_F(ServeTest, ManyBackToBackStreamsAllEnd) {
  WaitIdle();
  std::vector<std::thread> clients;
  std::vector<std::string> problems(kMaxConcurrent);
  for (int c = 0; c < kMaxConcurrent; ++c) {
    clients.emplace_back([c, &problems] {
      // Short requests: under ASan each token's logits (a 151,669-row reference GEMM) are slow.
      for (int i = 0; i < 16 && problems[c].empty(); ++i) {
        const Json body = Completion("Stream " + std::to_string(c) + "." + std::to_string(i), 3,
                                     {{"stream", true}});
        const Reply r = Post(port(), "/v1/completions", body.dump());
        if (r.status != 200 || Events(r.body).empty() || Events(r.body).back() != "[DONE]")
          problems[c] =
              "request " + std::to_string(i) + ": " + std::to_string(r.status) + " " + r.body;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (const std::string& p : problems) EXPECT_EQ(p, "");
}

// The first UTF-8 character of s, and the last.
std::string FirstChar(const std::string& s) {
  const auto c = static_cast<unsigned char>(s[0]);
  return s.substr(0, c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2);
}
std::string LastChar(const std::string& s) {
  size_t at = s.size() - 1;
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xc0) == 0x80) --at;
  return s.substr(at);
}

TEST_F(ServeTest, StopStringSplitAcrossTokensIsCaughtAndNotEmitted) {
  const std::string prompt = "Once upon a time";
  const std::vector<std::string> pieces = EnginePieces(Encode(prompt, false), 24);
  const std::string full = Joined(pieces);
  // A stop string made of the last character of one token and the first of the next.
  std::string stop;
  for (size_t i = 2; i + 1 < pieces.size() && stop.empty(); ++i) {
    if (!pieces[i].empty() && !pieces[i + 1].empty())
      stop = LastChar(pieces[i]) + FirstChar(pieces[i + 1]);
  }
  ASSERT_FALSE(stop.empty()) << full;
  const std::string expected = full.substr(0, full.find(stop));
  for (bool stream : {false, true}) {
    const Json body =
        Completion(prompt, 24, {{"stop", {"never-generated-stop", stop}}, {"stream", stream}});
    const Reply r = Post(port(), "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    std::string text, finish;
    if (stream) {
      for (const std::string& e : Events(r.body)) {
        if (e == "[DONE]") continue;
        const Json j = Json::parse(e);
        text += j["choices"][0]["text"].get<std::string>();
        if (j["choices"][0]["finish_reason"].is_string()) finish = j["choices"][0]["finish_reason"];
      }
    } else {
      const Json j = Json::parse(r.body);
      text = j["choices"][0]["text"];
      finish = j["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(text, expected) << "stream " << stream << ", stop '" << stop << "'";
    EXPECT_EQ(finish, "stop");
    EXPECT_EQ(text.find(stop), std::string::npos);
  }
}

// prompt + max_tokens may reach the context and no further, and a request at the limit gets every
// token it asked for.
TEST_F(ServeTest, MaxTokensUpToTheContextAreAllGenerated) {
  const std::vector<int32_t> prompt(kContext - 4, 42);
  Json body = Completion("", 4);
  body["prompt"] = prompt;
  const Reply r = Post(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["usage"]["completion_tokens"], 4);
  body["max_tokens"] = 5;
  const Reply over = Post(port(), "/v1/completions", body.dump());
  EXPECT_EQ(over.status, 400) << over.body;
  body["prompt"] = std::vector<int32_t>(kContext, 42);
  body["max_tokens"] = 1;
  EXPECT_EQ(Post(port(), "/v1/completions", body.dump()).status, 400);
}

TEST_F(ServeTest, RepeatedPromptIsServedFromThePrefixCache) {
  std::string prompt =
      "A long shared system prompt that fills several KV blocks of sixteen tokens:";
  for (int i = 0; i < 6; ++i) prompt += " again and again, word after word,";
  const Reply first = Post(port(), "/v1/completions", Completion(prompt, 2).dump());
  ASSERT_EQ(first.status, 200) << first.body;
  const Reply second = Post(port(), "/v1/completions", Completion(prompt, 2).dump());
  ASSERT_EQ(second.status, 200) << second.body;
  const Json u1 = Json::parse(first.body)["usage"], u2 = Json::parse(second.body)["usage"];
  EXPECT_EQ(u1["prompt_tokens_details"]["cached_tokens"], 0);
  const int64_t prompt_tokens = u2["prompt_tokens"];
  const int64_t cached = u2["prompt_tokens_details"]["cached_tokens"];
  EXPECT_EQ(u2["prompt_tokens_details"]["kvtier_cached_from"]["engine"], cached)
      << "a private pool's hits are the engine's own";
  EXPECT_GE(cached, prompt_tokens - 16) << u2.dump();
  EXPECT_GT(cached, 0);
  EXPECT_EQ(Json::parse(first.body)["choices"][0]["text"],
            Json::parse(second.body)["choices"][0]["text"]);
  const std::string metrics = Send(port(), http::verb::get, "/metrics").body;
  // No daemon: every cached token is the engine's private prefix cache's.
  EXPECT_GE(Metric(metrics, "kvtier_serve_prompt_tokens_total{source=\"engine\"}"), cached);
  for (const char* tier : {"t0", "t1", "t2", "t3"}) {
    EXPECT_EQ(
        Metric(metrics, std::string("kvtier_serve_prompt_tokens_total{source=\"") + tier + "\"}"),
        0)
        << tier;
  }
  EXPECT_GT(Metric(metrics, "kvtier_serve_time_to_first_token_seconds_count"), 0);
  EXPECT_GT(Metric(metrics, "kvtier_serve_inter_token_latency_seconds_count"), 0);
}

// Every error an OpenAI client may meet, with the status and the field it names.
TEST_F(ServeTest, BadRequestsGetTheStatusAndNameTheField) {
  struct Case {
    std::string target, body;
    int status;
    std::string param;  // "": null
  };
  const std::string long_prompt = [] {
    Json ids = Json::array();
    for (int i = 0; i < kContext + 1; ++i) ids.push_back(100 + i);
    return Json({{"model", kModelName}, {"prompt", ids}}).dump();
  }();
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400, ""},
      {"/v1/completions", "[1, 2]", 400, ""},
      {"/v1/completions", std::string(100, '[') + std::string(100, ']'), 400, ""},
      {"/v1/completions", R"({"model": "test-model", "prompt": "\xff\xfe"})", 400, ""},
      {"/v1/completions", R"({"prompt": "hi"})", 400, "model"},
      {"/v1/completions", R"({"model": "test-model"})", 400, "prompt"},
      {"/v1/completions", R"({"model": "test-model", "prompt": 7})", 400, "prompt"},
      {"/v1/completions", R"({"model": "test-model", "prompt": [1, -2]})", 400, "prompt"},
      {"/v1/completions", R"({"model": "test-model", "prompt": [999999999]})", 400, "prompt"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "max_tokens": "ten"})", 400,
       "max_tokens"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "max_tokens": 0})", 400,
       "max_tokens"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "max_tokens": 100000})", 400,
       "max_tokens"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "temperature": -1})", 400,
       "temperature"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "top_p": 0})", 400, "top_p"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "top_k": -5})", 400, "top_k"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "seed": 1.5})", 400, "seed"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "stop": 5})", 400, "stop"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "stop": [""]})", 400, "stop"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "stream": "yes"})", 400,
       "stream"},
      {"/v1/completions", R"({"model": "test-model", "prompt": "hi", "n": 2})", 400, "n"},
      {"/v1/completions", long_prompt, 400, "prompt"},
      {"/v1/completions", R"({"model": "gpt-4", "prompt": "hi"})", 404, "model"},
      {"/v1/chat/completions", R"({"model": "test-model", "messages": "hi"})", 400, "messages"},
      {"/v1/chat/completions", R"({"model": "test-model", "messages": [{"content": "x"}]})", 400,
       "messages[0].role"},
      {"/v1/chat/completions",
       R"({"model": "test-model", "messages": [{"role": "user", "content": 3}]})", 400,
       "messages[0].content"},
  };
  for (const Case& c : cases) {
    const Reply r = Post(port(), c.target, c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    const Json j = Json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    const Json& e = j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
    EXPECT_TRUE(e["type"].is_string()) << r.body;
    if (c.param.empty()) {
      EXPECT_TRUE(e["param"].is_null()) << r.body;
    } else {
      EXPECT_EQ(e["param"], c.param) << r.body;
    }
  }
  const Reply context = Post(port(), "/v1/completions", long_prompt);
  EXPECT_EQ(Json::parse(context.body)["error"]["code"], "context_length_exceeded");
}

TEST_F(ServeTest, UnknownPathsMethodsAndLargeBodiesAreRefused) {
  const Reply missing = Send(port(), http::verb::get, "/v1/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_FALSE(Json::parse(missing.body)["error"]["message"].is_null());
  const Reply get = Send(port(), http::verb::get, "/v1/completions");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.allow, "POST");
  EXPECT_EQ(Send(port(), http::verb::post, "/health").status, 405);
  // 413 from the Content-Length alone: the body is never sent.
  RawStream raw(port());
  raw.Write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n");
  const std::string reply = raw.ReadUntil("}}");
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  // And a body over the limit that is sent.
  const Reply big = Post(port(), "/v1/completions", std::string(70000, ' '));
  EXPECT_EQ(big.status, 413);
  // The server still serves.
  EXPECT_EQ(Send(port(), http::verb::get, "/health").status, 200);
}

TEST_F(ServeTest, SilentConnectionIsClosedAfterTheIdleTimeout) {
  RawStream silent(port());
  silent.Write("POST /v1/completions HTTP/1.1\r\n");  // and never the rest
  // Blocks until the server closes the connection (the test's own timeout fails it otherwise).
  EXPECT_EQ(silent.ReadUntil("never sent"), "");
  EXPECT_EQ(Send(port(), http::verb::get, "/health").status, 200);
}

// Reads a stream until its first generated text arrived.
void ReadFirstText(RawStream& s) { s.ReadUntil("\"text\"", 1); }

TEST_F(ServeTest, ClientThatLeavesMidStreamCancelsItsRequest) {
  const std::string idle = WaitIdle();
  const double before = Metric(idle, "kvtier_serve_requests_total{outcome=\"cancelled\"}");
  RawStream s(port());
  s.Write(RawPost("/v1/completions",
                  Completion("Leave early", kContext - 16, {{"stream", true}}).dump()));
  ReadFirstText(s);
  s.Close();
  const std::string metrics = WaitEnded(Ended(idle) + 1);
  EXPECT_EQ(Metric(metrics, "kvtier_serve_requests_total{outcome=\"cancelled\"}"), before + 1);
  EXPECT_EQ(Metric(metrics, "kvtier_serve_requests_running"), 0);
}

TEST_F(ServeTest, ClientThatLeavesANonStreamingRequestCancelsIt) {
  const std::string idle = WaitIdle();
  const double before = Metric(idle, "kvtier_serve_requests_total{outcome=\"cancelled\"}");
  RawStream s(port());
  s.Write(RawPost("/v1/completions", Completion("Leave before the answer", kContext - 16).dump()));
  // Wait until the engine holds it, then leave.
  for (int i = 0; i < 3000; ++i) {
    const std::string m = Send(port(), http::verb::get, "/metrics").body;
    if (Metric(m, "kvtier_serve_requests_running") > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s.Close();
  EXPECT_EQ(
      Metric(WaitEnded(Ended(idle) + 1), "kvtier_serve_requests_total{outcome=\"cancelled\"}"),
      before + 1);
}

TEST_F(ServeTest, RequestsPastMaxConcurrentGet429) {
  WaitIdle();
  std::vector<std::unique_ptr<RawStream>> streams;
  for (int i = 0; i < kMaxConcurrent; ++i) {
    streams.push_back(std::make_unique<RawStream>(port()));
    streams.back()->Write(RawPost(
        "/v1/completions",
        Completion("Hold a slot " + std::to_string(i), kContext - 16, {{"stream", true}}).dump()));
    ReadFirstText(*streams.back());
  }
  const Reply refused = Post(port(), "/v1/completions", Completion("One too many", 2).dump());
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(Json::parse(refused.body)["error"]["type"], "rate_limit_error");
  const double ended = Ended(Send(port(), http::verb::get, "/metrics").body);
  for (auto& s : streams) s->Close();
  WaitEnded(ended + kMaxConcurrent);
  // The slots come back.
  EXPECT_EQ(Post(port(), "/v1/completions", Completion("Room again", 2).dump()).status, 200);
}

// --daemon: the KV cache lives in kvtierd's T1 (engine/daemon_kv_blocks.h), so a server started
// again finds the prompt's blocks the first one computed, and answers with the same text.
TEST_F(ServeTest, WithADaemonARestartedServerFindsThePromptInKvtierd) {
  auto model = engine::CpuModel::Load(model_);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto slot_bytes = (*model)->KvGeometry(16).slot_elems() * sizeof(float);
  kvtier::testing::TempDir dir;
  auto daemon = kvtier::testing::KvtierdProcess::Start(
      dir.path(), {"--t1.capacity_bytes", "8MiB", "--t1.slot_bytes", std::to_string(slot_bytes),
                   "--t1.touch_threads", "1", "--t1.huge_pages", "off", "--t2.enabled", "false"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::string prompt = "A shared prefix that kvtierd keeps for the next server:";
  for (int i = 0; i < 6; ++i) prompt += " the same words once more,";
  std::string text[2];
  int64_t cached[2] = {-1, -1}, prompt_tokens = 0;
  for (int run = 0; run < 2; ++run) {
    ServerProcess server;
    ASSERT_TRUE(server.Start(
        Binary(), {"serve", "--model", model_, "--device", "cpu", "--port", "0",
                   "--served-model-name", kModelName, "--daemon", (*daemon)->socket_path()}))
        << server.output();
    const Reply r = Post(server.port(), "/v1/completions", Completion(prompt, 4).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json j = Json::parse(r.body);
    text[run] = j["choices"][0]["text"];
    cached[run] = j["usage"]["prompt_tokens_details"]["cached_tokens"];
    prompt_tokens = j["usage"]["prompt_tokens"];
    EXPECT_EQ(server.Stop(), 0) << server.output();
  }
  EXPECT_EQ(cached[0], 0);
  EXPECT_GE(cached[1], prompt_tokens - 16);  // every full block but the last token's
  EXPECT_GT(cached[1], 0);
  EXPECT_EQ(text[0], text[1]);
}

// --daemon, one server: the second request's prompt is found in kvtierd's T1, and /metrics says
// so: prompt tokens by source add up to the prompts, the cached ones counted as t1, none as the
// engine's own cache (DaemonKvBlocks has none).
TEST_F(ServeTest, WithADaemonARepeatedPromptIsCountedAsServedFromT1) {
  auto model = engine::CpuModel::Load(model_);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto slot_bytes = (*model)->KvGeometry(16).slot_elems() * sizeof(float);
  kvtier::testing::TempDir dir;
  auto daemon = kvtier::testing::KvtierdProcess::Start(
      dir.path(), {"--t1.capacity_bytes", "8MiB", "--t1.slot_bytes", std::to_string(slot_bytes),
                   "--t1.touch_threads", "1", "--t1.huge_pages", "off", "--t2.enabled", "false"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ServerProcess server;
  ASSERT_TRUE(server.Start(
      Binary(), {"serve", "--model", model_, "--device", "cpu", "--port", "0",
                 "--served-model-name", kModelName, "--daemon", (*daemon)->socket_path()}))
      << server.output();
  std::string prompt = "Counted by tier: a prefix that the second request finds in kvtierd,";
  for (int i = 0; i < 6; ++i) prompt += " one more clause of it,";
  int64_t cached[2] = {-1, -1}, prompt_tokens[2] = {0, 0};
  for (int run = 0; run < 2; ++run) {
    const Reply r = Post(server.port(), "/v1/completions", Completion(prompt, 2).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json u = Json::parse(r.body)["usage"];
    cached[run] = u["prompt_tokens_details"]["cached_tokens"];
    prompt_tokens[run] = u["prompt_tokens"];
    // The extension splits them by tier: the CPU backend attends in T1, so its hits are T1's.
    EXPECT_EQ(u["prompt_tokens_details"]["kvtier_cached_from"],
              Json({{"engine", 0}, {"t0", 0}, {"t1", cached[run]}, {"t2", 0}, {"t3", 0}}))
        << u.dump();
    EXPECT_EQ(u["kvtier_preemptions"], 0) << u.dump();
  }
  EXPECT_EQ(cached[0], 0);
  EXPECT_GE(cached[1], prompt_tokens[1] - 16);
  ASSERT_GT(cached[1], 0);
  // The metrics are counted before the answer goes out, so they are there now.
  const std::string metrics = Send(server.port(), http::verb::get, "/metrics").body;
  auto source = [&metrics](const std::string& s) {
    return Metric(metrics, "kvtier_serve_prompt_tokens_total{source=\"" + s + "\"}");
  };
  EXPECT_EQ(source("t1"), cached[1]) << metrics;
  EXPECT_EQ(source("engine"), 0) << metrics;
  EXPECT_EQ(source("t0"), 0) << metrics;
  EXPECT_EQ(source("t2"), 0) << metrics;
  EXPECT_EQ(source("computed"), prompt_tokens[0] + prompt_tokens[1] - cached[1]) << metrics;
  EXPECT_EQ(Metric(metrics, "kvtier_serve_preemptions_total"), 0) << metrics;
  // Two prefills and a decode at least, each a step that ran the model.
  EXPECT_GE(Metric(metrics, "kvtier_serve_engine_steps_total{kind=\"ran\"}"), 3) << metrics;
  EXPECT_GT(Metric(metrics, "kvtier_serve_engine_seconds_total{part=\"forward\"}"), 0) << metrics;
  EXPECT_GT(Metric(metrics, "kvtier_serve_engine_seconds_total{part=\"schedule\"}"), 0) << metrics;
  for (const char* reason : {"running_wait", "limit", "prefix_loading", "prefix_room", "room"}) {
    const std::string series =
        std::string("kvtier_serve_admission_held_steps_total{reason=\"") + reason + "\"}";
    EXPECT_GE(Metric(metrics, series), 0) << series << " is exported\n" << metrics;
  }
  EXPECT_EQ(server.Stop(), 0) << server.output();
}

// A pool too small for two long requests at once: the later admission is preempted while the
// first runs (its KV released, resumed from the prefix cache), both are answered in full, and
// /metrics counts the preemption. The second request is sent once the first one's stream has
// begun, and the first still has about a hundred tokens to go, so the two overlap in the engine
// (few tokens: under ASan each token's logits are a slow 151,669-row reference GEMM).
TEST_F(ServeTest, PreemptionIsCountedAndBothRequestsAreAnswered) {
  ServerProcess server;
  // 10 blocks of 16 tokens: each request needs 7 (a few prompt tokens + 100 generated).
  ASSERT_TRUE(server.Start(
      Binary(), {"serve", "--model", model_, "--device", "cpu", "--port", "0",
                 "--served-model-name", kModelName, "--kv-blocks", "10", "--max-model-len", "128"}))
      << server.output();
  constexpr int kTokens = 100;
  RawStream first(server.port());
  first.Write(RawPost("/v1/completions",
                      Completion("The first long request", kTokens, {{"stream", true}}).dump()));
  first.ReadUntil("data: ");  // it runs
  const Reply second =
      Post(server.port(), "/v1/completions", Completion("The second long request", kTokens).dump());
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(Json::parse(second.body)["usage"]["completion_tokens"], kTokens);
  const std::string stream = first.ReadUntil("data: [DONE]");
  EXPECT_NE(stream.find("\"finish_reason\":\"length\""), std::string::npos) << stream;
  const std::string metrics = Send(server.port(), http::verb::get, "/metrics").body;
  EXPECT_GE(Metric(metrics, "kvtier_serve_preemptions_total"), 1) << metrics;
  EXPECT_EQ(Metric(metrics, "kvtier_serve_requests_total{outcome=\"length\"}"), 2) << metrics;
  EXPECT_EQ(server.Stop(), 0) << server.output();
}

TEST(ServeCliErrorsTest, MissingModelDirectoryIsNamedAndExits1) {
  const std::string out = TempRoot().string() + "_missing.out";
  const std::string command =
      Binary() + " serve --model /nonexistent/kvtier-model --port 0 >'" + out + "' 2>&1";
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--model /nonexistent/kvtier-model: not a directory"), std::string::npos)
      << text;
  std::filesystem::remove(out);
}

// Last in the file: it stops the server. A request in flight at SIGTERM is answered in full.
TEST_F(ServeTest, ZzSigtermDrainsTheRequestInFlightAndExits0) {
  WaitIdle();
  Reply reply;
  std::thread client([&reply] {
    reply = Post(port(), "/v1/completions", Completion("Finish me first", 200).dump());
  });
  for (int i = 0; i < 3000; ++i) {
    if (Metric(Send(port(), http::verb::get, "/metrics").body, "kvtier_serve_requests_running") >
        0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server_->Stop(), 0) << server_->output();
  started_ = false;
  client.join();
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json j = Json::parse(reply.body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 200);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace kvtier::serve_test
