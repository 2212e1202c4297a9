// The CPU backend's input checks: bad tokens, prompts past the context and a full KV pool are
// clear errors, and a failed call leaves the sequence as it was.
#include "engine/cpu_sequence.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvtier::engine {
namespace {

std::unique_ptr<CpuModel> Model() {
  absl::StatusOr<std::unique_ptr<CpuModel>> model =
      CpuModel::Load(KVTIER_SOURCE_DIR "/tests/engine/data/models/llama3");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

TEST(CpuSequenceTest, TokenOutsideTheVocabularyIsRefused) {
  std::unique_ptr<CpuModel> model = Model();
  CpuKvPool pool(model->KvGeometry(16), 4);
  CpuSequence seq(*model, pool);
  std::vector<float> logits;
  const std::vector<int32_t> tokens = {5, 512};
  absl::Status status = seq.Append(tokens, false, &logits);
  EXPECT_EQ(status.message(),
            "token 512 at index 1 is outside the vocabulary of llama3 (512 tokens)");
  EXPECT_TRUE(seq.tokens().empty());
  const std::vector<int32_t> negative = {-1};
  EXPECT_FALSE(seq.Append(negative, false, &logits).ok());
}

TEST(CpuSequenceTest, PromptLongerThanTheContextIsRefused) {
  std::unique_ptr<CpuModel> model = Model();
  CpuKvPool pool(model->KvGeometry(16), 32);
  CpuSequence seq(*model, pool);
  std::vector<int32_t> tokens(257);  // max_position_embeddings is 256
  std::iota(tokens.begin(), tokens.end(), 0);
  std::vector<float> logits;
  EXPECT_EQ(seq.Append(tokens, false, &logits).message(),
            "positions 0..256 exceed the context of llama3 (256 tokens, max_position_embeddings)");
  tokens.resize(256);
  EXPECT_TRUE(seq.Append(tokens, false, &logits).ok());
  const int32_t one = 3;
  EXPECT_FALSE(seq.Append({&one, 1}, false, &logits).ok());  // position 256
}

TEST(CpuSequenceTest, FullPoolIsResourceExhausted) {
  std::unique_ptr<CpuModel> model = Model();
  CpuKvPool pool(model->KvGeometry(4), 2);  // 8 tokens
  CpuSequence seq(*model, pool);
  std::vector<int32_t> tokens(8, 7);
  std::vector<float> logits;
  ASSERT_TRUE(seq.Append(tokens, false, &logits).ok());
  const int32_t one = 3;
  absl::Status status = seq.Append({&one, 1}, false, &logits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(seq.tokens().size(), 8u);
}

TEST(CpuSequenceTest, GenerateStopsAtEos) {
  const std::string dir = KVTIER_SOURCE_DIR "/tests/engine/data/models/llama3";
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir);
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::Open(dir);
  ASSERT_TRUE(config.ok() && checkpoint.ok());
  absl::StatusOr<HostWeights> weights = LoadHostWeights(*config, *checkpoint);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const std::vector<int32_t> prompt = {1, 5, 3};
  GenerateOptions options;
  options.max_tokens = 8;
  options.stop_at_eos = false;
  const CpuModel free_model(*config, *weights);
  CpuKvPool pool(free_model.KvGeometry(16), 16);
  absl::StatusOr<std::vector<int32_t>> free_run = Generate(free_model, pool, prompt, options);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  ASSERT_EQ(free_run->size(), 8u);
  // With the third token made an eos, generation stops at its first occurrence, eos included.
  const int32_t eos = (*free_run)[2];
  config->generation.eos_token_ids = {static_cast<uint32_t>(eos)};
  const CpuModel model(*config, *std::move(weights));
  options.stop_at_eos = true;
  std::vector<int32_t> seen;
  absl::StatusOr<std::vector<int32_t>> out =
      Generate(model, pool, prompt, options, [&](int32_t t) { seen.push_back(t); });
  ASSERT_TRUE(out.ok()) << out.status();
  const size_t stop = std::find(free_run->begin(), free_run->end(), eos) - free_run->begin();
  EXPECT_EQ(*out, std::vector<int32_t>(free_run->begin(), free_run->begin() + stop + 1));
  EXPECT_EQ(seen, *out);
}

}  // namespace
}  // namespace kvtier::engine
