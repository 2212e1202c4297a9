// The engine loop on the GPU backend: golden_gpu.json's prompts (greedy margins >= 0.07, clear of
// 16-bit rounding) run batched — 90-token prompts chunked into steps shared with decodes, again
// from the prefix cache, and in a pool small enough to force preemption — give transformers' 32
// greedy tokens, as each does alone through GenerateOnGpu (gpu_golden_test.cc). And the batched
// forward's logits for each entry are within bf16 tolerance of the single-sequence forward's (the
// two differ in summation order only: Gemv or GEMM, decode splits). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "engine/gpu_backend.h"
#include "engine/llm_engine.h"
#include "tests/kernels/gpu_test_util.h"

namespace kvtier::engine {
namespace {

using Json = nlohmann::json;

constexpr float kBf16Tolerance = 0.1f;  // gpu_golden_test.cc's

std::string ModelDir(const std::string& name) {
  return std::string(KVTIER_SOURCE_DIR) + "/tests/engine/data/models/" + name;
}

class GpuBatchTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    KVTIER_REQUIRE_GPU();
    GpuModelOptions options;
    options.dtype = ops::gpu::DType::kBf16;
    absl::StatusOr<std::unique_ptr<GpuModel>> model = GpuModel::Load(ModelDir(GetParam()), options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    std::ifstream in(ModelDir(GetParam()) + "/golden_gpu.json");
    ASSERT_TRUE(in.good());
    golden_ = Json::parse(in);
  }

  std::unique_ptr<LlmEngine> Engine(int32_t slots, int64_t step_tokens) {
    absl::StatusOr<std::unique_ptr<GpuBackend>> backend = GpuBackend::Create(*model_, 16, slots);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    EngineOptions options;
    options.max_step_tokens = step_tokens;
    absl::StatusOr<std::unique_ptr<LlmEngine>> engine =
        LlmEngine::Create(*std::move(backend), options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  // Runs every golden prompt at once (32 greedy tokens each) and checks the goldens' tokens.
  // Returns the outputs in prompt order.
  std::vector<RequestOutput> RunGoldens(LlmEngine& engine, const std::string& what) {
    RequestOptions options;
    options.max_tokens = 32;
    options.ignore_eos = true;
    std::map<uint64_t, size_t> index;
    const Json& prompts = golden_["prompts"];
    for (size_t i = 0; i < prompts.size(); ++i) {
      absl::StatusOr<uint64_t> id =
          engine.Add(prompts[i]["ids"].get<std::vector<int32_t>>(), options);
      EXPECT_TRUE(id.ok()) << id.status();
      if (id.ok()) index[*id] = i;
    }
    absl::StatusOr<std::vector<RequestOutput>> done = engine.RunUntilIdle();
    EXPECT_TRUE(done.ok()) << done.status();
    std::vector<RequestOutput> out(prompts.size());
    if (!done.ok()) return out;
    for (RequestOutput& r : *done) out[index[r.id]] = std::move(r);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(out[i].tokens, prompts[i]["greedy"]["tokens"].get<std::vector<int32_t>>())
          << what << ", prompt " << i;
    }
    return out;
  }

  std::unique_ptr<GpuModel> model_;
  Json golden_;
};

TEST_P(GpuBatchTest, BatchedGreedyGivesTransformersTokens) {
  std::unique_ptr<LlmEngine> engine = Engine(128, 48);
  ASSERT_NE(engine, nullptr);
  const std::vector<RequestOutput> first = RunGoldens(*engine, "batched, chunked");
  const std::vector<RequestOutput> again = RunGoldens(*engine, "from the prefix cache");
  int64_t cached = 0;
  for (const RequestOutput& r : again) cached += r.cached_tokens;
  EXPECT_GT(cached, 0);
}

TEST_P(GpuBatchTest, PreemptedRequestsGiveTheSameTokens) {
  std::unique_ptr<LlmEngine> engine = Engine(12, 256);  // 192 tokens for 4 requests of up to 121
  ASSERT_NE(engine, nullptr);
  RunGoldens(*engine, "preempted");
  EXPECT_GT(engine->scheduler().stats().preemptions, 0);
}

TEST_P(GpuBatchTest, BatchedLogitsAreTheSingleSequenceLogits) {
  const Json& prompts = golden_["prompts"];
  const auto vocab = static_cast<int64_t>(model_->config().vocab_size);
  absl::StatusOr<std::unique_ptr<GpuKvPool>> pool =
      GpuKvPool::Create(model_->KvGeometry(16), 64, model_->dtype());
  ASSERT_TRUE(pool.ok()) << pool.status();
  // Entry b: prompt b, its first half computed before, its second half the step's chunk; then a
  // decode-only step of one token each.
  std::vector<std::vector<int32_t>> ids, tables;
  for (size_t b = 0; b < prompts.size(); ++b) {
    ids.push_back(prompts[b]["ids"].get<std::vector<int32_t>>());
    tables.emplace_back(8);
    std::iota(tables.back().begin(), tables.back().end(), static_cast<int32_t>(8 * b));
  }
  auto download = [&](const float* device, int64_t rows) {
    std::vector<float> host(rows * vocab);
    EXPECT_TRUE(gpu::CopyAsync(host.data(), device, host.size() * 4, model_->stream()).ok());
    EXPECT_TRUE(gpu::DeviceSynchronize().ok());
    return host;
  };
  std::vector<std::vector<float>> single(ids.size()), single_decode(ids.size());
  const int32_t next = 5;
  for (size_t b = 0; b < ids.size(); ++b) {
    const size_t half = ids[b].size() / 2;
    ASSERT_TRUE(model_->Forward({ids[b].data(), half}, 0, tables[b], **pool, false).ok());
    absl::StatusOr<const float*> l = model_->Forward({ids[b].data() + half, ids[b].size() - half},
                                                     half, tables[b], **pool, false);
    ASSERT_TRUE(l.ok()) << l.status();
    single[b] = download(*l, 1);
    l = model_->Forward({&next, 1}, ids[b].size(), tables[b], **pool, false);
    ASSERT_TRUE(l.ok()) << l.status();
    single_decode[b] = download(*l, 1);
  }
  std::vector<ChunkInput> step, decode;
  for (size_t b = 0; b < ids.size(); ++b) {
    const size_t half = ids[b].size() / 2;
    step.push_back(
        {{ids[b].data() + half, ids[b].size() - half}, static_cast<int64_t>(half), tables[b]});
    decode.push_back({{&next, 1}, static_cast<int64_t>(ids[b].size()), tables[b]});
  }
  absl::StatusOr<const float*> l = model_->Forward(step, **pool);  // the halves are in the pool
  ASSERT_TRUE(l.ok()) << l.status();
  const std::vector<float> batched = download(*l, static_cast<int64_t>(ids.size()));
  l = model_->Forward(decode, **pool);
  ASSERT_TRUE(l.ok()) << l.status();
  const std::vector<float> batched_decode = download(*l, static_cast<int64_t>(ids.size()));
  float worst = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    for (int64_t v = 0; v < vocab; ++v) {
      auto err = [&](const std::vector<float>& got, const std::vector<float>& want) {
        return std::abs(got[b * vocab + v] - want[v]) / std::max(1.0f, std::abs(want[v]));
      };
      worst = std::max({worst, err(batched, single[b]), err(batched_decode, single_decode[b])});
    }
  }
  std::printf("[ measured ] %s bf16: batched vs single max error %.5f (tolerance %.3f)\n",
              GetParam().c_str(), worst, kBf16Tolerance);
  EXPECT_LE(worst, kBf16Tolerance);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GpuBatchTest,
                         ::testing::Values("llama3", "qwen2", "qwen3", "mistral"));

}  // namespace
}  // namespace kvtier::engine
