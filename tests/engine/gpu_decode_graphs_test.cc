// Batched decode steps replayed from graphs (GpuModel's batch graphs, padded to a batch-size bucket
// by GpuDecodeInputs) against the same steps launched kernel by kernel:
//   - the engine loop gives transformers' greedy tokens (golden_gpu.json, margins >= 0.07) with
//     graphs on and off, for several numbers of requests (padded: 3 -> 4, 6 -> 8, 13 -> 16,
//     21 -> 24) whose contexts differ (20- and 90-token prompts, half the requests added three
//     steps late, chunked prefill between decodes);
//   - a model's decode step over a shared pool, graph against no graph, for ragged contexts over
//     three consecutive steps (the second replays the first one's recording with new inputs, the
//     third crosses into the next context bucket):
//     logits within bf16 tolerance, and the pool changed only at the batch's own new K/V rows —
//     the padding rows write nowhere in it.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/gpu_backend.h"
#include "engine/gpu_decode_inputs.h"
#include "engine/llm_engine.h"
#include "tests/kernels/gpu_test_util.h"

namespace kvtier::engine {
namespace {

using Json = nlohmann::json;

constexpr float kBf16Tolerance = 0.1f;  // gpu_batch_test.cc's

std::string ModelDir(const std::string& name) {
  return std::string(KVTIER_SOURCE_DIR) + "/tests/engine/data/models/" + name;
}

std::unique_ptr<GpuModel> LoadModel(const std::string& name, bool graphs) {
  GpuModelOptions options;
  options.dtype = ops::gpu::DType::kBf16;
  options.decode_graphs = graphs;
  absl::StatusOr<std::unique_ptr<GpuModel>> model = GpuModel::Load(ModelDir(name), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

TEST(GpuDecodeInputsTest, BatchBucketsPadLittle) {
  const std::map<int64_t, int64_t> want = {{1, 1},     {2, 2},     {3, 4},     {4, 4},    {5, 8},
                                           {8, 8},     {9, 16},    {63, 64},   {64, 64},  {65, 80},
                                           {129, 160}, {256, 256}, {257, 320}, {512, 512}};
  for (const auto& [batch, rows] : want) {
    EXPECT_EQ(GpuDecodeInputs::BatchBucket(batch), rows) << "batch " << batch;
  }
}

class GpuDecodeGraphsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    KVTIER_REQUIRE_GPU();
    std::ifstream in(ModelDir(GetParam()) + "/golden_gpu.json");
    ASSERT_TRUE(in.good());
    golden_ = Json::parse(in);
  }

  // `requests` requests cycling over the golden prompts, 32 greedy tokens each, the second half
  // added after three steps; each must give its prompt's golden tokens. Returns the batch graphs
  // recorded.
  size_t RunEngine(bool graphs, int requests) {
    std::unique_ptr<GpuModel> model = LoadModel(GetParam(), graphs);
    if (model == nullptr) return 0;
    absl::StatusOr<std::unique_ptr<GpuBackend>> backend = GpuBackend::Create(*model, 16, 256);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return 0;
    EngineOptions options;
    options.max_step_tokens = 48;  // prompts chunked, prefill steps between decode steps
    options.prefix_caching = false;
    absl::StatusOr<std::unique_ptr<LlmEngine>> engine =
        LlmEngine::Create(*std::move(backend), options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return 0;
    const Json& prompts = golden_["prompts"];
    RequestOptions request;
    request.max_tokens = 32;
    request.ignore_eos = true;
    std::map<uint64_t, size_t> prompt_of;
    std::map<uint64_t, std::vector<int32_t>> tokens;
    auto add = [&](int i) {
      const size_t p = static_cast<size_t>(i) % prompts.size();
      absl::StatusOr<uint64_t> id =
          (*engine)->Add(prompts[p]["ids"].get<std::vector<int32_t>>(), request);
      EXPECT_TRUE(id.ok()) << id.status();
      if (id.ok()) prompt_of[*id] = p;
    };
    for (int i = 0; i < (requests + 1) / 2; ++i) add(i);
    for (int step = 0; !(*engine)->idle(); ++step) {
      if (step == 3) {
        for (int i = (requests + 1) / 2; i < requests; ++i) add(i);
      }
      absl::StatusOr<StepOutput> out = (*engine)->Step();
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return 0;
      for (const RequestOutput& r : out->finished) tokens[r.id] = r.tokens;
    }
    EXPECT_EQ(tokens.size(), static_cast<size_t>(requests));
    for (const auto& [id, got] : tokens) {
      const Json& want = prompts[prompt_of[id]]["greedy"]["tokens"];
      EXPECT_EQ(got, want.get<std::vector<int32_t>>())
          << (graphs ? "graphs" : "no graphs") << ", " << requests << " requests, request " << id
          << " (prompt " << prompt_of[id] << ")";
    }
    return model->recorded_batch_graphs();
  }

  Json golden_;
};

TEST_P(GpuDecodeGraphsTest, EngineGivesTheGoldenTokensWithAndWithoutGraphs) {
  for (int requests : {1, 3, 6, 13, 21}) {
    EXPECT_EQ(RunEngine(false, requests), 0u) << requests << " requests";
    EXPECT_GT(RunEngine(true, requests), 0u) << requests << " requests";
  }
}

// The pool's bytes, as 16-bit words.
std::vector<uint16_t> Download(const GpuKvPool& pool) {
  std::vector<uint16_t> host(static_cast<size_t>(pool.num_slots() * pool.geometry().slot_elems()));
  EXPECT_TRUE(gpu::DeviceSynchronize().ok());
  EXPECT_TRUE(gpu::CopyAsync(host.data(), pool.data(), host.size() * 2, nullptr).ok());
  EXPECT_TRUE(gpu::DeviceSynchronize().ok());
  return host;
}

std::vector<float> Download(const float* logits, int64_t rows, int64_t vocab) {
  std::vector<float> host(static_cast<size_t>(rows * vocab));
  EXPECT_TRUE(gpu::DeviceSynchronize().ok());
  EXPECT_TRUE(gpu::CopyAsync(host.data(), logits, host.size() * 4, nullptr).ok());
  EXPECT_TRUE(gpu::DeviceSynchronize().ok());
  return host;
}

TEST_P(GpuDecodeGraphsTest, GraphStepIsTheKernelByKernelStepAndWritesOnlyItsRows) {
  std::unique_ptr<GpuModel> graphed = LoadModel(GetParam(), true);
  std::unique_ptr<GpuModel> plain = LoadModel(GetParam(), false);
  ASSERT_NE(graphed, nullptr);
  ASSERT_NE(plain, nullptr);
  const int64_t vocab = graphed->config().vocab_size, bt = 16;
  constexpr int64_t kTable = 8;  // slots per sequence: up to 128 tokens
  for (int64_t batch : {3, 5, 11}) {
    absl::StatusOr<std::unique_ptr<GpuKvPool>> pool = GpuKvPool::Create(
        graphed->KvGeometry(bt), static_cast<int32_t>(batch * kTable), graphed->dtype());
    ASSERT_TRUE(pool.ok()) << pool.status();
    const ops::PagedKvGeometry& g = (*pool)->geometry();
    std::mt19937 rng(static_cast<uint32_t>(batch));
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab) - 1);
    std::vector<std::vector<int32_t>> tables(batch), prompts(batch);
    std::vector<int64_t> lens(batch);
    for (int64_t b = 0; b < batch; ++b) {
      tables[b].resize(kTable);
      std::iota(tables[b].begin(), tables[b].end(), static_cast<int32_t>(b * kTable));
      // Ragged: 3 to 61 tokens, and 62 for the first, so that the three steps' longest contexts
      // (63, 64, 65 tokens) cross from the 64-token context bucket into the 128-token one.
      lens[b] = b == 0 ? 62 : 3 + (b * 37) % 59;
      for (int64_t i = 0; i < lens[b]; ++i) prompts[b].push_back(id(rng));
      ASSERT_TRUE(plain->Forward(prompts[b], 0, tables[b], **pool, false).ok());
    }
    for (int step = 0; step < 3; ++step) {
      std::vector<int32_t> next(batch);
      std::vector<ChunkInput> chunks;
      for (int64_t b = 0; b < batch; ++b) {
        next[b] = id(rng);
        chunks.push_back({{&next[b], 1}, lens[b], tables[b]});
      }
      const std::vector<uint16_t> before = Download(**pool);
      absl::StatusOr<const float*> l = graphed->Forward(chunks, **pool);
      ASSERT_TRUE(l.ok()) << l.status();
      const std::vector<float> got = Download(*l, batch, vocab);
      std::vector<uint16_t> after = Download(**pool);
      for (int64_t b = 0; b < batch; ++b) {  // the batch's own new rows may change
        const int64_t slot = tables[b][lens[b] / bt], row = lens[b] % bt;
        for (int64_t layer = 0; layer < g.layers; ++layer) {
          for (int kv = 0; kv < 2; ++kv) {
            const int64_t at = g.Offset(slot, layer, kv, row);
            std::memcpy(after.data() + at, before.data() + at, 2 * g.token_elems());
          }
        }
      }
      EXPECT_TRUE(after == before)
          << "batch " << batch << ", step " << step << ": the graph step wrote outside its rows";
      l = plain->Forward(chunks, **pool);  // rewrites the same rows
      ASSERT_TRUE(l.ok()) << l.status();
      const std::vector<float> want = Download(*l, batch, vocab);
      float worst = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1.0f, std::abs(want[i])));
      }
      EXPECT_LE(worst, kBf16Tolerance) << "batch " << batch << ", step " << step;
      for (int64_t b = 0; b < batch; ++b) ++lens[b];
    }
    // Each batch's pool is new (its recordings drop the last pool's): padded to 4, 8 or 16 rows,
    // one recording for the 64-token context bucket (steps 1 and 2: step 2 replays it with new
    // inputs) and one for the 128-token bucket (step 3).
    EXPECT_EQ(graphed->recorded_batch_graphs(), 2u) << "batch " << batch;
  }
  EXPECT_EQ(plain->recorded_batch_graphs(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GpuDecodeGraphsTest,
                         ::testing::Values("llama3", "qwen2", "qwen3", "mistral"));

}  // namespace
}  // namespace kvtier::engine
