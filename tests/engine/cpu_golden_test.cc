// The CPU backend against transformers: for each tiny random-weight model that transformers 5.17
// wrote (tests/engine/data/make_models.py), the engine loads the files, runs the prompts and must
// match transformers' logits within fp32 tolerance and its greedy continuation token for token.
//
// Tolerance: |engine - transformers| <= 2e-5 * max(1, |transformers|) per logit. Both compute in
// fp32 with different summation orders (and the goldens are rounded to 7 digits); the errors
// measured are <= 2.1e-6, so 2e-5 leaves room without hiding a real difference (a wrong RoPE, mask,
// norm or bias moves logits by 1e-2 or more).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/cpu_model.h"
#include "engine/cpu_sequence.h"
#include "engine/rope_config.h"

namespace kvtier::engine {
namespace {

using Json = nlohmann::json;

constexpr float kTolerance = 2e-5f;

std::string ModelDir(const std::string& name) {
  return std::string(KVTIER_SOURCE_DIR) + "/tests/engine/data/models/" + name;
}

Json Golden(const std::string& name) {
  std::ifstream in(ModelDir(name) + "/golden.json");
  EXPECT_TRUE(in.good()) << name;
  return Json::parse(in);
}

// Largest |got - want| / max(1, |want|), the measure the tolerance bounds.
float MaxError(const float* got, const std::vector<float>& want) {
  float worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1.0f, std::abs(want[i])));
  }
  return worst;
}

class CpuGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CpuModel>> model = CpuModel::Load(ModelDir(GetParam()));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    golden_ = Golden(GetParam());
  }

  // A pool of 64 slots of 16 tokens: room for two sequences of 132 tokens.
  CpuKvPool Pool(int64_t block_tokens = 16, int32_t slots = 64) const {
    return CpuKvPool(model_->KvGeometry(block_tokens), slots);
  }

  std::vector<int32_t> Ids(const Json& prompt) const {
    return prompt["ids"].get<std::vector<int32_t>>();
  }

  std::unique_ptr<CpuModel> model_;
  Json golden_;
};

TEST_P(CpuGoldenTest, RopeFrequenciesMatch) {
  const std::vector<float> want = golden_["inv_freq"].get<std::vector<float>>();
  const std::vector<float> got = RopeInvFreq(model_->config().rope, model_->config().head_dim);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f * want[i]) << i;
}

TEST_P(CpuGoldenTest, PrefillLogitsMatchTransformersAtEveryPosition) {
  const std::vector<int> sampled = golden_["sampled_ids"].get<std::vector<int>>();
  const int64_t vocab = model_->config().vocab_size;
  for (const Json& prompt : golden_["prompts"]) {
    const std::vector<int32_t> ids = Ids(prompt);
    CpuKvPool pool = Pool();
    CpuSequence seq(*model_, pool);
    std::vector<float> logits;  // [n, vocab]
    ASSERT_TRUE(seq.Append(ids, /*all_logits=*/true, &logits).ok());
    const int64_t n = static_cast<int64_t>(ids.size());
    EXPECT_LE(MaxError(logits.data() + (n - 1) * vocab, prompt["last_logits"]), kTolerance)
        << "prompt of " << n << " tokens, last position";
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> got;
      for (int id : sampled) got.push_back(logits[i * vocab + id]);
      ASSERT_LE(MaxError(got.data(), prompt["sampled_logits"][i]), kTolerance)
          << "prompt of " << n << " tokens, position " << i;
      const float* row = logits.data() + i * vocab;
      EXPECT_EQ(std::max_element(row, row + vocab) - row, prompt["argmax"][i].get<int>())
          << "position " << i;
    }
  }
}

TEST_P(CpuGoldenTest, GreedyContinuationMatchesTransformersFor32Steps) {
  for (const Json& prompt : golden_["prompts"]) {
    const Json& greedy = prompt["greedy"];
    const std::vector<int32_t> want = greedy["tokens"].get<std::vector<int32_t>>();
    CpuKvPool pool = Pool();
    CpuSequence seq(*model_, pool);
    std::vector<float> logits;
    ASSERT_TRUE(seq.Append(Ids(prompt), false, &logits).ok());
    for (size_t step = 0; step < want.size(); ++step) {
      const int32_t token =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ASSERT_EQ(token, want[step]) << "step " << step;
      EXPECT_NEAR(logits[token], greedy["max_logits"][step].get<float>(),
                  kTolerance * std::max(1.0f, std::abs(logits[token])))
          << "step " << step;
      if (step + 1 < want.size()) {
        ASSERT_TRUE(seq.Append({&token, 1}, false, &logits).ok());
      }
    }
    EXPECT_LE(MaxError(logits.data(), greedy["last_logits"]), kTolerance) << "last decode step";
  }
}

TEST_P(CpuGoldenTest, GenerateIsTheGreedyContinuation) {
  const Json& prompt = golden_["prompts"][1];
  CpuKvPool pool = Pool();
  GenerateOptions options;
  options.max_tokens = 32;
  options.stop_at_eos = false;  // the goldens ran 32 steps whatever the tokens
  std::vector<int32_t> streamed;
  absl::StatusOr<std::vector<int32_t>> out =
      Generate(*model_, pool, Ids(prompt), options, [&](int32_t t) { streamed.push_back(t); });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, prompt["greedy"]["tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(streamed, *out);
  EXPECT_EQ(pool.free_slots(), pool.num_slots());  // the sequence gave its slots back
}

// A prompt prefilled in chunks — each chunk attending to the cached prefix in paged blocks — and
// two sequences interleaved in one pool (so block tables are not contiguous runs of slots) give
// transformers' logits too.
TEST_P(CpuGoldenTest, ChunkedPrefillOverInterleavedBlocksMatches) {
  const Json& long_prompt = golden_["prompts"][2];
  const Json& mid_prompt = golden_["prompts"][1];
  const std::vector<int32_t> a = Ids(long_prompt), b = Ids(mid_prompt);
  CpuKvPool pool = Pool(/*block_tokens=*/4, /*slots=*/80);
  CpuSequence seq_a(*model_, pool), seq_b(*model_, pool);
  std::vector<float> logits_a, logits_b;
  size_t done_a = 0, done_b = 0;
  const size_t chunks[] = {7, 1, 13, 4, 30};
  for (size_t i = 0; done_a < a.size() || done_b < b.size(); ++i) {
    const size_t c = chunks[i % 5];
    if (done_a < a.size()) {
      const size_t len = std::min(c, a.size() - done_a);
      ASSERT_TRUE(seq_a.Append({a.data() + done_a, len}, false, &logits_a).ok());
      done_a += len;
    }
    if (done_b < b.size()) {
      const size_t len = std::min(c + 2, b.size() - done_b);
      ASSERT_TRUE(seq_b.Append({b.data() + done_b, len}, false, &logits_b).ok());
      done_b += len;
    }
  }
  EXPECT_LE(MaxError(logits_a.data(), long_prompt["last_logits"]), kTolerance);
  EXPECT_LE(MaxError(logits_b.data(), mid_prompt["last_logits"]), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Architectures, CpuGoldenTest,
                         ::testing::Values("llama3", "qwen2", "qwen3", "mistral"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

}  // namespace
}  // namespace kvtier::engine
