// The engine loop on the CPU backend: requests of different lengths run batched — prefill chunks
// mixed with decodes, preempted and resumed, starting from cached prefixes — choose exactly the
// tokens each chooses alone through the single-sequence path (engine::Generate).
#include "engine/llm_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "engine/cpu_backend.h"
#include "engine/cpu_sequence.h"

namespace kvtier::engine {
namespace {

constexpr int64_t kBlockTokens = 4;

std::unique_ptr<CpuModel> Model(const std::string& family) {
  absl::StatusOr<std::unique_ptr<CpuModel>> model =
      CpuModel::Load(KVTIER_SOURCE_DIR "/tests/engine/data/models/" + family);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

std::vector<int32_t> Prompt(int64_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((seed * 131 + 17 * i * i + i) % 509);
  return t;
}

struct Request {
  std::vector<int32_t> prompt;
  RequestOptions options;
};

RequestOptions Options(int32_t max_tokens, float temperature = 0, uint64_t seed = 0) {
  RequestOptions o;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  o.sampling.temperature = temperature;
  o.sampling.top_k = temperature > 0 ? 50 : 0;
  o.sampling.seed = seed;
  return o;
}

// Each request alone through CpuSequence (engine::Generate).
std::vector<int32_t> Alone(const CpuModel& model, const Request& r) {
  CpuKvPool pool(model.KvGeometry(kBlockTokens), 256);
  GenerateOptions g;
  g.max_tokens = r.options.max_tokens;
  g.sampling = r.options.sampling;
  g.stop_at_eos = !r.options.ignore_eos;
  absl::StatusOr<std::vector<int32_t>> out = Generate(model, pool, r.prompt, g);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<int32_t>();
}

std::unique_ptr<LlmEngine> Engine(const CpuModel& model, int32_t slots, EngineOptions options) {
  absl::StatusOr<std::unique_ptr<LlmEngine>> engine =
      LlmEngine::Create(std::make_unique<CpuBackend>(model, kBlockTokens, slots), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

// Adds every request at once and runs the engine until idle; outputs by request index.
std::vector<RequestOutput> RunAll(LlmEngine& engine, const std::vector<Request>& requests) {
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) {
    absl::StatusOr<uint64_t> id = engine.Add(requests[i].prompt, requests[i].options);
    EXPECT_TRUE(id.ok()) << id.status();
    if (id.ok()) index[*id] = i;
  }
  std::vector<RequestOutput> by_index(requests.size());
  absl::StatusOr<std::vector<RequestOutput>> done = engine.RunUntilIdle();
  EXPECT_TRUE(done.ok()) << done.status();
  if (done.ok()) {
    for (RequestOutput& r : *done) by_index[index[r.id]] = std::move(r);
  }
  return by_index;
}

std::vector<Request> MixedRequests() {
  return {{Prompt(1, 1), Options(12)},          {Prompt(5, 2), Options(9)},
          {Prompt(37, 3), Options(6)},          {Prompt(16, 4), Options(14)},
          {Prompt(23, 5), Options(3)},          {Prompt(8, 6), Options(10, 0.9f, 7)},
          {Prompt(19, 7), Options(8, 1.3f, 11)}};
}

class LlmEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LlmEngineTest, BatchedTokensEqualEachRequestRunAlone) {
  std::unique_ptr<CpuModel> model = Model(GetParam());
  ASSERT_NE(model, nullptr);
  const std::vector<Request> requests = MixedRequests();
  EngineOptions options;
  options.max_step_tokens = 16;  // long prompts are chunked and share steps with decodes
  std::unique_ptr<LlmEngine> engine = Engine(*model, 256, options);
  ASSERT_NE(engine, nullptr);
  const std::vector<RequestOutput> out = RunAll(*engine, requests);
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(out[i].tokens, Alone(*model, requests[i])) << "request " << i;
    EXPECT_EQ(out[i].finish_reason, FinishReason::kLength);
    distinct.insert(out[i].tokens);
  }
  // Different prompts give different outputs: a batch that mixed sequences up could not match.
  EXPECT_EQ(distinct.size(), requests.size());
  EXPECT_EQ(engine->blocks().free_slots(), 256);
}

TEST_P(LlmEngineTest, PreemptedRequestsResumeWithTheSameTokens) {
  std::unique_ptr<CpuModel> model = Model(GetParam());
  ASSERT_NE(model, nullptr);
  const std::vector<Request> requests = MixedRequests();
  EngineOptions options;
  options.max_step_tokens = 32;
  options.prefix_caching = GetParam() != "qwen2";  // recompute from nothing on one model
  std::unique_ptr<LlmEngine> engine = Engine(*model, 12, options);  // 48 tokens for them all
  ASSERT_NE(engine, nullptr);
  const std::vector<RequestOutput> out = RunAll(*engine, requests);
  int32_t preemptions = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(out[i].tokens, Alone(*model, requests[i])) << "request " << i;
    preemptions += out[i].preemptions;
    // Resuming from the cache is not the prompt's saving: only the first admission counts.
    EXPECT_LT(out[i].prompt_cached_tokens, out[i].prompt_tokens) << "request " << i;
    EXPECT_LE(out[i].prompt_cached_tokens, out[i].cached_tokens) << "request " << i;
  }
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(engine->scheduler().stats().preemptions, preemptions);
}

TEST_P(LlmEngineTest, SharedPrefixIsTakenFromTheCache) {
  std::unique_ptr<CpuModel> model = Model(GetParam());
  ASSERT_NE(model, nullptr);
  std::unique_ptr<LlmEngine> engine = Engine(*model, 64, EngineOptions{});
  ASSERT_NE(engine, nullptr);
  const Request first{Prompt(30, 9), Options(5)};
  std::vector<int32_t> shared(first.prompt.begin(), first.prompt.begin() + 22);
  shared.insert(shared.end(), {7, 8, 9});  // 25 tokens, the first 22 shared: 5 full blocks
  const Request second{shared, Options(7)};
  const std::vector<RequestOutput> a = RunAll(*engine, {first});
  const std::vector<RequestOutput> b = RunAll(*engine, {second});
  EXPECT_EQ(a[0].cached_tokens, 0);
  EXPECT_EQ(b[0].cached_tokens, 20);
  EXPECT_EQ(b[0].prompt_cached_tokens, 20);
  EXPECT_EQ(b[0].model_tokens, 25 - 20 + 6);  // the rest of the prompt, then 6 decodes
  EXPECT_EQ(b[0].tokens, Alone(*model, second));
  EXPECT_EQ(a[0].tokens, Alone(*model, first));
}

TEST_P(LlmEngineTest, CancelledRequestEndsAndOthersGoOn) {
  std::unique_ptr<CpuModel> model = Model(GetParam());
  ASSERT_NE(model, nullptr);
  EngineOptions options;
  options.max_step_tokens = 8;
  std::unique_ptr<LlmEngine> engine = Engine(*model, 64, options);
  ASSERT_NE(engine, nullptr);
  const Request keep{Prompt(6, 1), Options(10)}, drop{Prompt(20, 2), Options(10)};
  absl::StatusOr<uint64_t> keep_id = engine->Add(keep.prompt, keep.options);
  absl::StatusOr<uint64_t> drop_id = engine->Add(drop.prompt, drop.options);
  ASSERT_TRUE(keep_id.ok() && drop_id.ok());
  ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(engine->Step().ok());  // `drop` is mid-prefill
  EXPECT_TRUE(engine->Cancel(*drop_id));
  absl::StatusOr<std::vector<RequestOutput>> done = engine->RunUntilIdle();
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->size(), 2u);
  EXPECT_EQ((*done)[0].id, *drop_id);
  EXPECT_EQ((*done)[0].finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE((*done)[0].tokens.empty());
  EXPECT_EQ((*done)[1].tokens, Alone(*model, keep));
  EXPECT_EQ(engine->blocks().free_slots(), 64);
}

TEST_P(LlmEngineTest, StreamedTokensAreTheOutputs) {
  std::unique_ptr<CpuModel> model = Model(GetParam());
  ASSERT_NE(model, nullptr);
  std::unique_ptr<LlmEngine> engine = Engine(*model, 64, EngineOptions{});
  ASSERT_NE(engine, nullptr);
  for (const Request& r : MixedRequests()) ASSERT_TRUE(engine->Add(r.prompt, r.options).ok());
  std::map<uint64_t, std::vector<int32_t>> streamed, finished;
  while (!engine->idle()) {
    absl::StatusOr<StepOutput> out = engine->Step();
    ASSERT_TRUE(out.ok()) << out.status();
    for (const StepOutput::Token& t : out->tokens) streamed[t.id].push_back(t.token);
    for (const RequestOutput& r : out->finished) finished[r.id] = r.tokens;
  }
  EXPECT_EQ(streamed, finished);
}

TEST_P(LlmEngineTest, StopsAtTheModelsEosAsGenerateDoes) {
  const std::string dir = KVTIER_SOURCE_DIR "/tests/engine/data/models/" + GetParam();
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir);
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir);
  ASSERT_TRUE(config.ok() && checkpoint.ok());
  absl::StatusOr<HostWeights> weights = LoadHostWeights(*config, *checkpoint);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const CpuModel free_model(*config, *weights);
  const Request r{Prompt(9, 3), Options(12)};
  const std::vector<int32_t> free_run = Alone(free_model, r);
  ASSERT_EQ(free_run.size(), 12u);
  // With the fourth token made the model's eos, the engine stops at its first occurrence.
  config->generation.eos_token_ids = {static_cast<uint32_t>(free_run[3])};
  const CpuModel model(*config, *std::move(weights));
  std::unique_ptr<LlmEngine> engine = Engine(model, 64, EngineOptions{});
  ASSERT_NE(engine, nullptr);
  Request stop = r;
  stop.options.ignore_eos = false;
  const std::vector<RequestOutput> out = RunAll(*engine, {stop, r});
  const size_t first = std::find(free_run.begin(), free_run.end(), free_run[3]) - free_run.begin();
  EXPECT_EQ(out[0].tokens, std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1));
  EXPECT_EQ(out[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(out[0].tokens, Alone(model, stop));
  EXPECT_EQ(out[1].tokens, free_run);  // ignore_eos
}

INSTANTIATE_TEST_SUITE_P(Families, LlmEngineTest,
                         ::testing::Values("llama3", "qwen2", "qwen3", "mistral"));

TEST(LlmEngineCheckTest, BadRequestsAndOptionsAreRefused) {
  std::unique_ptr<CpuModel> model = Model("llama3");
  ASSERT_NE(model, nullptr);
  EngineOptions too_long;
  too_long.max_model_len = 257;
  EXPECT_FALSE(
      LlmEngine::Create(std::make_unique<CpuBackend>(*model, kBlockTokens, 8), too_long).ok());
  std::unique_ptr<LlmEngine> engine = Engine(*model, 8, EngineOptions{});
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->scheduler().options().max_step_tokens, 512);  // the default
  EXPECT_EQ(engine->scheduler().options().max_model_len, 256);    // the model's context
  EXPECT_EQ(engine->Add({1, 512}, Options(1)).status().message(),
            "request: token 512 at index 1 is outside the vocabulary (512 tokens)");
  EXPECT_EQ(engine->Add(Prompt(30, 1), Options(8)).status().code(),
            absl::StatusCode::kInvalidArgument);  // 37 tokens: 10 blocks, the pool has 8
  RequestOptions bad_sampling = Options(1, 0.5f);
  bad_sampling.sampling.top_p = 0;
  EXPECT_EQ(engine->Add({1, 2}, bad_sampling).status().message(),
            "request: sampling wants temperature >= 0, top_k >= 0 and 0 < top_p <= 1 (got 0.5, "
            "50, 0)");
  bad_sampling = Options(1, -1.0f);
  EXPECT_EQ(engine->Add({1, 2}, bad_sampling).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine->idle());
}

}  // namespace
}  // namespace kvtier::engine
