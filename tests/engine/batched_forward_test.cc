// CpuModel's batched forward: a step over several sequences gives, for each, exactly the logits the
// single-sequence Forward gives for the same chunk, whatever else is in the batch.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "engine/cpu_model.h"

namespace kvtier::engine {
namespace {

constexpr int64_t kBlockTokens = 4;

std::unique_ptr<CpuModel> Model(const std::string& family) {
  absl::StatusOr<std::unique_ptr<CpuModel>> model =
      CpuModel::Load(KVTIER_SOURCE_DIR "/tests/engine/data/models/" + family);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

std::vector<int32_t> Tokens(int64_t n, int32_t first) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((first + 37 * i) % 500);
  return t;
}

// One sequence's history and next chunk, with its own slots (disjoint from the others').
struct Case {
  std::vector<int32_t> history;  // already computed before the step
  std::vector<int32_t> chunk;    // the step's tokens
  std::vector<int32_t> table;
};

class BatchedForwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchedForwardTest, EachSequenceGetsItsOwnSingleSequenceLogits) {
  std::unique_ptr<CpuModel> model = Model(GetParam());
  ASSERT_NE(model, nullptr);
  // A prefill from 0, a prefill chunk after a cached prefix that ends mid-block, a decode, and a
  // decode at a block boundary.
  std::vector<Case> cases = {{{}, Tokens(7, 3), {}},
                             {Tokens(9, 11), Tokens(6, 5), {}},
                             {Tokens(13, 29), Tokens(1, 8), {}},
                             {Tokens(8, 2), Tokens(1, 40), {}}};
  const int32_t slots_each = 6;
  int32_t next = 0;
  for (Case& c : cases) {
    c.table.resize(slots_each);
    std::iota(c.table.begin(), c.table.end(), next);
    next += slots_each;
  }
  const auto vocab = static_cast<int64_t>(model->config().vocab_size);
  // Single-sequence reference in its own pool.
  CpuKvPool single_pool(model->KvGeometry(kBlockTokens), next);
  std::vector<std::vector<float>> expected;
  for (const Case& c : cases) {
    std::vector<float> logits;
    if (!c.history.empty()) {
      ASSERT_TRUE(model->Forward(c.history, 0, c.table, single_pool, false, &logits).ok());
    }
    ASSERT_TRUE(model
                    ->Forward(c.chunk, static_cast<int64_t>(c.history.size()), c.table, single_pool,
                              false, &logits)
                    .ok());
    expected.push_back(logits);
  }
  // Batched: the histories first (a batch of their own), then every chunk in one step.
  CpuKvPool pool(model->KvGeometry(kBlockTokens), next);
  std::vector<ChunkInput> histories, step;
  for (const Case& c : cases) {
    if (!c.history.empty()) histories.push_back({c.history, 0, c.table});
    step.push_back({c.chunk, static_cast<int64_t>(c.history.size()), c.table});
  }
  std::vector<float> logits;
  ASSERT_TRUE(model->Forward(histories, pool, &logits).ok());
  ASSERT_TRUE(model->Forward(step, pool, &logits).ok());
  ASSERT_EQ(static_cast<int64_t>(logits.size()), vocab * static_cast<int64_t>(cases.size()));
  for (size_t b = 0; b < cases.size(); ++b) {
    const std::vector<float> row(logits.begin() + b * vocab, logits.begin() + (b + 1) * vocab);
    EXPECT_EQ(row, expected[b]) << "batch entry " << b;
  }
}

TEST_P(BatchedForwardTest, DecodeOnlyBatchMatchesSingleDecodes) {
  std::unique_ptr<CpuModel> model = Model(GetParam());
  ASSERT_NE(model, nullptr);
  CpuKvPool pool(model->KvGeometry(kBlockTokens), 12);
  const std::vector<std::vector<int32_t>> tables = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}};
  const std::vector<std::vector<int32_t>> prompts = {Tokens(3, 1), Tokens(8, 2), Tokens(5, 3)};
  std::vector<float> logits;
  std::vector<std::vector<float>> expected;
  for (size_t b = 0; b < prompts.size(); ++b) {
    ASSERT_TRUE(model->Forward(prompts[b], 0, tables[b], pool, false, &logits).ok());
    const int32_t token = 100 + static_cast<int32_t>(b);
    ASSERT_TRUE(model
                    ->Forward({&token, 1}, static_cast<int64_t>(prompts[b].size()), tables[b], pool,
                              false, &logits)
                    .ok());
    expected.push_back(logits);
  }
  // The same decodes again, batched in reverse order: they overwrite the same K/V rows.
  const int32_t tokens[3] = {100, 101, 102};
  std::vector<ChunkInput> step;
  for (int b = 2; b >= 0; --b) {
    step.push_back({{&tokens[b], 1}, static_cast<int64_t>(prompts[b].size()), tables[b]});
  }
  ASSERT_TRUE(model->Forward(step, pool, &logits).ok());
  const auto vocab = static_cast<int64_t>(model->config().vocab_size);
  for (int b = 0; b < 3; ++b) {
    const int64_t row = 2 - b;
    EXPECT_EQ(std::vector<float>(logits.begin() + row * vocab, logits.begin() + (row + 1) * vocab),
              expected[b])
        << "sequence " << b;
  }
}

TEST(BatchedForwardCheckTest, BadEntryIsNamed) {
  std::unique_ptr<CpuModel> model = Model("llama3");
  CpuKvPool pool(model->KvGeometry(kBlockTokens), 4);
  const std::vector<int32_t> good = {1, 2}, bad = {3, 600};
  const std::vector<int32_t> t0 = {0}, t1 = {1};
  const std::vector<ChunkInput> batch = {{good, 0, t0}, {bad, 0, t1}};
  std::vector<float> logits;
  EXPECT_EQ(model->Forward(batch, pool, &logits).message(),
            "batch entry 1: token 600 at index 1 is outside the vocabulary of llama3 (512 tokens)");
  EXPECT_EQ(model->Forward(std::span<const ChunkInput>(), pool, &logits).message(),
            "Forward: an empty batch");
}

INSTANTIATE_TEST_SUITE_P(Families, BatchedForwardTest,
                         ::testing::Values("llama3", "qwen2", "qwen3", "mistral"));

}  // namespace
}  // namespace kvtier::engine
