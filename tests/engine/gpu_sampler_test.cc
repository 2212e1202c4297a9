// GpuSampler::ChooseRows, the batched token choice (one launch, one copy back): for rows of random
// logits — with ties, NaN, -inf, rows of nothing but -inf, rows that want no token, more rows than
// the kernel has thread blocks — each greedy or sampled with its own temperature, top-k, top-p,
// seed and step, it gives exactly the token Choose (the per-row path it replaces) gives, and on
// rows of finite logits the token the CPU reference (ops::ref::Sample) gives. Rows with NaN or
// nothing but -inf are the per-row GPU kernels' business only: the reference differs from them
// there (its Argmax takes a NaN logits[0]; NaN or -inf - -inf poisons its sums, and it answers
// its last kept rank), while the kernels never choose a NaN and answer the top token. Skips
// without a GPU.
#include "engine/gpu_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tests/kernels/gpu_test_util.h"

namespace kvtier::engine {
namespace {

// Rows with NaN or nothing but -inf (see Logits).
bool Degenerate(int64_t r) { return r % 7 == 2 || (r % 7 == 3 && r % 2 == 1); }

// Row r's logits: normal(0, 3), with a few special rows.
std::vector<float> Logits(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> out(rows * vocab);
  for (float& v : out) v = normal(rng);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out.data() + r * vocab;
    switch (r % 7) {
      case 1:  // ties at the top: the lowest id wins
        row[5] = row[9] = row[vocab - 1] = 20.0f;
        break;
      case 2:  // NaN and -inf never chosen
        row[0] = std::nanf("");
        row[3] = -inf;
        row[4] = std::nanf("");
        break;
      case 3:
        if (r % 2 == 1) {
          for (int64_t v = 0; v < vocab; ++v) row[v] = -inf;  // nothing to weigh
        }
        break;
      default:
        break;
    }
  }
  return out;
}

SampleSpec Spec(int64_t r) {
  SampleSpec s;
  s.wanted = r % 11 != 10;
  s.step = static_cast<uint64_t>(r * 3 + 1);
  s.params.seed = 1000 + static_cast<uint64_t>(r);
  switch (r % 5) {
    case 0:  // greedy
      break;
    case 1:
      s.params.temperature = 0.7f;
      break;
    case 2:
      s.params.temperature = 1.0f;
      s.params.top_k = 20;
      break;
    case 3:
      s.params.temperature = 1.3f;
      s.params.top_p = 0.9f;
      break;
    default:
      s.params.temperature = 0.8f;
      s.params.top_k = 50;
      s.params.top_p = 0.6f;
      break;
  }
  return s;
}

void ExpectRowsMatch(int64_t rows, int64_t vocab) {
  const std::vector<float> logits = Logits(rows, vocab, static_cast<uint32_t>(rows + vocab));
  std::vector<SampleSpec> specs;
  for (int64_t r = 0; r < rows; ++r) specs.push_back(Spec(r));
  absl::StatusOr<gpu::Stream> stream = gpu::Stream::Create();
  KVTIER_ASSERT_OK(stream);
  absl::StatusOr<void*> device = gpu::DeviceAlloc(logits.size() * sizeof(float));
  KVTIER_ASSERT_OK(device);
  auto* dev = static_cast<float*>(*device);
  KVTIER_ASSERT_OK(gpu::CopyAsync(dev, logits.data(), logits.size() * 4, stream->handle()));
  absl::StatusOr<std::unique_ptr<GpuSampler>> sampler = GpuSampler::Create(vocab);
  KVTIER_ASSERT_OK(sampler);
  absl::StatusOr<std::vector<int32_t>> batched =
      (*sampler)->ChooseRows(dev, specs, stream->handle());
  KVTIER_ASSERT_OK(batched);
  ASSERT_EQ(batched->size(), specs.size());
  for (int64_t r = 0; r < rows; ++r) {
    if (!specs[r].wanted) {
      EXPECT_EQ((*batched)[r], -1) << "row " << r;
      continue;
    }
    absl::StatusOr<int32_t> one =
        (*sampler)->Choose(dev + r * vocab, specs[r].params, specs[r].step, stream->handle());
    KVTIER_ASSERT_OK(one);
    const int32_t ref =
        ops::ref::Sample(logits.data() + r * vocab, vocab, specs[r].params, specs[r].step);
    EXPECT_EQ((*batched)[r], *one) << "row " << r << " (per-row GPU path)";
    if (!Degenerate(r)) {
      EXPECT_EQ((*batched)[r], ref) << "row " << r << " (CPU reference)";
    }
  }
  KVTIER_ASSERT_OK(gpu::DeviceFree(dev));
}

TEST(GpuSamplerTest, ChooseRowsGivesThePerRowAndReferenceTokens) {
  KVTIER_REQUIRE_GPU();
  ExpectRowsMatch(1, 512);
  ExpectRowsMatch(37, 512);
  ExpectRowsMatch(300, 1000);  // more rows than thread blocks: blocks take rows in turn
  ExpectRowsMatch(9, 128256);  // Llama 3's vocabulary
}

TEST(GpuSamplerTest, ChooseRowsGrowsAndShrinksItsBatch) {
  KVTIER_REQUIRE_GPU();
  ExpectRowsMatch(3, 512);
  ExpectRowsMatch(200, 512);
  ExpectRowsMatch(5, 512);
}

TEST(GpuSamplerTest, NoRowWantedGivesMinusOneEverywhere) {
  KVTIER_REQUIRE_GPU();
  absl::StatusOr<std::unique_ptr<GpuSampler>> sampler = GpuSampler::Create(512);
  KVTIER_ASSERT_OK(sampler);
  const std::vector<SampleSpec> none(4);
  absl::StatusOr<std::vector<int32_t>> got = (*sampler)->ChooseRows(nullptr, none, nullptr);
  KVTIER_ASSERT_OK(got);
  EXPECT_EQ(*got, std::vector<int32_t>(4, -1));
}

}  // namespace
}  // namespace kvtier::engine
