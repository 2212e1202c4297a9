// Sample on the GPU (kernels/ops/gpu/ops_gpu.h) against ref::Sample: the same token for the same
// logits, parameters and draw, over vocabularies of real sizes, temperatures, top-k and top-p cuts
// and many draws; ties ordered by id; NaN logits never chosen.
//
// Exactness: the kernel sums probabilities as fixed point, the reference as doubles; they may
// differ only when a cut falls within ~1e-8 relative of a cumulative mass, which none of these
// few thousand draws does (a mismatch here is a bug, not rounding).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ops/gpu/ops_gpu.h"
#include "kernels/ops/sampling.h"
#include "tests/kernels/ops_gpu_test_util.h"

namespace kvtier::ops_gpu_test {
namespace {

using ops::SamplingParams;
namespace ref = ops::ref;

std::vector<float> Normal(size_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every (params, step) on `logits`: the GPU's token equals the reference's.
void ExpectSameChoices(const std::vector<float>& logits, const std::vector<SamplingParams>& params,
                       int steps) {
  const auto vocab = static_cast<int64_t>(logits.size());
  DeviceBuffer logits_dev(logits);
  DeviceBuffer workspace(static_cast<size_t>(ops::gpu::SampleWorkspaceBytes(vocab)));
  DeviceBuffer out(4);
  for (const SamplingParams& p : params) {
    for (int step = 0; step < steps; ++step) {
      ASSERT_TRUE(ops::gpu::Sample(logits_dev.as<float>(), vocab, p, step, workspace.get(),
                                   ops::gpu::SampleWorkspaceBytes(vocab), out.as<int32_t>(),
                                   nullptr)
                      .ok());
      const int32_t got = out.Download<int32_t>(1)[0];
      ASSERT_EQ(got, ref::Sample(logits.data(), vocab, p, static_cast<uint64_t>(step)))
          << "vocab " << vocab << " T " << p.temperature << " top_k " << p.top_k << " top_p "
          << p.top_p << " seed " << p.seed << " step " << step;
    }
  }
}

const std::vector<SamplingParams> kParams = {
    {.temperature = 1.0f, .seed = 1},
    {.temperature = 0.7f, .top_k = 50, .seed = 2},
    {.temperature = 1.3f, .top_p = 0.9f, .seed = 3},
    {.temperature = 0.6f, .top_k = 20, .top_p = 0.8f, .seed = 4},
    {.temperature = 2.0f, .top_k = 1, .seed = 5},
    {.temperature = 0.05f, .top_p = 0.5f, .seed = 6},
};

TEST(SampleGpu, SmallVocabularyMatchesTheReference) {
  KVTIER_REQUIRE_GPU();
  ExpectSameChoices(Normal(512, 2.0f, 11), kParams, 200);
}

// Llama 3's vocabulary, logits as a random-weight model gives them (nearly flat: the nucleus is
// most of the vocabulary) and as a trained one does (a few clear favourites).
TEST(SampleGpu, LlamaVocabularyMatchesTheReference) {
  KVTIER_REQUIRE_GPU();
  ExpectSameChoices(Normal(128256, 0.5f, 12), kParams, 16);
  std::vector<float> peaked = Normal(128256, 1.0f, 13);
  for (int i = 0; i < 10; ++i) peaked[i * 977] += 12.0f;
  ExpectSameChoices(peaked, kParams, 16);
}

// Qwen's vocabulary (151,936 = above 2^17), with many exact ties (logits on a 0.25 grid): ties
// are ranked by id, as the reference's stable sort ranks them.
TEST(SampleGpu, TiesRankByIdInAQwenVocabulary) {
  KVTIER_REQUIRE_GPU();
  std::vector<float> logits = Normal(151936, 1.0f, 14);
  for (float& x : logits) x = std::round(x * 4) / 4;
  ExpectSameChoices(logits, kParams, 16);
}

TEST(SampleGpu, NanLogitsAreNeverChosen) {
  KVTIER_REQUIRE_GPU();
  std::vector<float> logits = Normal(1000, 1.0f, 15);
  for (int i = 0; i < 1000; i += 3) logits[i] = NAN;
  const auto vocab = static_cast<int64_t>(logits.size());
  DeviceBuffer logits_dev(logits);
  DeviceBuffer workspace(static_cast<size_t>(ops::gpu::SampleWorkspaceBytes(vocab)));
  DeviceBuffer out(4);
  for (int step = 0; step < 100; ++step) {
    ASSERT_TRUE(ops::gpu::Sample(logits_dev.as<float>(), vocab, {.temperature = 1.0f, .seed = 9},
                                 step, workspace.get(), ops::gpu::SampleWorkspaceBytes(vocab),
                                 out.as<int32_t>(), nullptr)
                    .ok());
    EXPECT_NE(out.Download<int32_t>(1)[0] % 3, 0) << "step " << step;
  }
}

TEST(SampleGpuArguments, GreedyAndBadCutsAreInvalidArgument) {
  KVTIER_REQUIRE_GPU();
  DeviceBuffer buf(1 << 16);
  for (const SamplingParams& p :
       {SamplingParams{.temperature = 0}, SamplingParams{.temperature = 1, .top_k = -1},
        SamplingParams{.temperature = 1, .top_p = 0}}) {
    const absl::Status s = ops::gpu::Sample(buf.as<float>(), 100, p, 0, buf.get(), 1 << 16,
                                            buf.as<int32_t>(), nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

}  // namespace
}  // namespace kvtier::ops_gpu_test
