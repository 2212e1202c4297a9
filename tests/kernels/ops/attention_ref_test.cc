// Paged attention references: the payload layout, hand-checked softmax weights, and prefill /
// decode over shuffled slots against a dense attention written out plainly here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops/attention.h"
#include "kernels/ops/paged_kv.h"

namespace kvtier::ops::ref {
namespace {

TEST(PagedKvTest, WriteKvPlacesTokensBlockMajor) {
  const PagedKvGeometry g{.layers = 2, .block_tokens = 2, .kv_heads = 1, .head_dim = 2};
  ASSERT_EQ(g.slot_elems(), 2 * 2 * 2 * 1 * 2);
  std::vector<float> pool(3 * g.slot_elems(), 0);
  const std::vector<float> k = {1, 2}, v = {3, 4};
  const int64_t token_slot = 2 * 2 + 1;  // slot 2, token row 1
  WriteKv(k.data(), v.data(), &token_slot, 1, g, /*layer=*/1, pool.data());
  // [layer][k,v][token][head][dim]: layer 1, K, token 1 -> (1*2 + 0)*2 + 1 = 5 rows in.
  const int64_t base = 2 * g.slot_elems();
  EXPECT_EQ(pool[base + 5 * 2], 1);
  EXPECT_EQ(pool[base + 5 * 2 + 1], 2);
  EXPECT_EQ(pool[base + 7 * 2], 3);  // V: (1*2 + 1)*2 + 1 = 7 rows in
  EXPECT_EQ(pool[base + 7 * 2 + 1], 4);
  EXPECT_EQ(std::count(pool.begin(), pool.end(), 0.0f), static_cast<long>(pool.size()) - 4);
}

// One layer, head_dim 1, block_tokens 1; K/V written into slots {5, 2} (not in order).
struct TinyPool {
  PagedKvGeometry g{.layers = 1, .block_tokens = 1, .kv_heads = 1, .head_dim = 1};
  std::vector<float> pool = std::vector<float>(6 * 2, 0);
  std::vector<int32_t> table = {5, 2};
  TinyPool(float k0, float v0, float k1, float v1) {
    const int64_t slots[2] = {5, 2};
    const float k[2] = {k0, k1}, v[2] = {v0, v1};
    WriteKv(k, v, slots, 2, g, 0, pool.data());
  }
};

TEST(AttentionRefTest, SoftmaxWeightsValuesAndFollowsTheBlockTable) {
  // q.k = {0, ln 3} -> weights {1/4, 3/4}; values {0, 4} -> 3.
  TinyPool p(0.0f, 0.0f, std::log(3.0f), 4.0f);
  const AttentionParams params{.kv = p.g, .layer = 0, .q_heads = 2, .scale = 1.0f};
  const std::vector<float> q = {1, 1};  // two query heads sharing the one KV head (GQA)
  const int32_t kv_len = 2;
  std::vector<float> out(2);
  AttentionDecode(params, q.data(), &kv_len, p.table.data(), 2, 1, p.pool.data(), out.data());
  EXPECT_NEAR(out[0], 3.0f, 1e-6);
  EXPECT_NEAR(out[1], 3.0f, 1e-6);
}

TEST(AttentionRefTest, CausalMaskAndSlidingWindow) {
  TinyPool p(0.0f, 2.0f, 0.0f, 4.0f);
  AttentionParams params{.kv = p.g, .layer = 0, .q_heads = 1, .scale = 1.0f};
  const std::vector<float> q = {1, 1};  // two queries: positions 0 and 1
  const int32_t q_indptr[2] = {0, 2};
  const int32_t kv_len = 2;
  std::vector<float> out(2);
  AttentionPrefill(params, q.data(), q_indptr, &kv_len, p.table.data(), 2, 1, p.pool.data(),
                   out.data());
  EXPECT_NEAR(out[0], 2.0f, 1e-6);  // position 0 sees only itself
  EXPECT_NEAR(out[1], 3.0f, 1e-6);  // equal scores: the mean of 2 and 4
  params.sliding_window = 1;        // each query sees only itself
  AttentionPrefill(params, q.data(), q_indptr, &kv_len, p.table.data(), 2, 1, p.pool.data(),
                   out.data());
  EXPECT_NEAR(out[1], 4.0f, 1e-6);
}

// Dense causal attention over contiguous k, v [len, kv_heads, d] for query at `pos`.
std::vector<float> Dense(const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, int64_t pos, int64_t q_heads,
                         int64_t kv_heads, int64_t d, int64_t window, float scale) {
  std::vector<float> out(q_heads * d);
  for (int64_t h = 0; h < q_heads; ++h) {
    const int64_t g = h / (q_heads / kv_heads);
    std::vector<double> w;
    const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t t = first; t <= pos; ++t) {
      double dot = 0;
      for (int64_t j = 0; j < d; ++j) dot += q[h * d + j] * k[(t * kv_heads + g) * d + j];
      w.push_back(dot * scale);
    }
    const double mx = *std::max_element(w.begin(), w.end());
    double sum = 0;
    for (double& x : w) sum += (x = std::exp(x - mx));
    for (int64_t j = 0; j < d; ++j) {
      double acc = 0;
      for (int64_t t = first; t <= pos; ++t) acc += w[t - first] * v[(t * kv_heads + g) * d + j];
      out[h * d + j] = static_cast<float>(acc / sum);
    }
  }
  return out;
}

TEST(AttentionRefTest, PagedPrefillOverCachedPrefixAndDecodeMatchDense) {
  const PagedKvGeometry g{.layers = 3, .block_tokens = 4, .kv_heads = 2, .head_dim = 8};
  const int64_t q_heads = 6, len = 23, prefix = 9, layer = 1, blocks = 6;  // 23 tokens: 6 blocks
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  auto random = [&](int64_t count) {
    std::vector<float> x(count);
    for (float& e : x) e = dist(rng);
    return x;
  };
  const std::vector<float> k = random(len * g.token_elems()), v = random(len * g.token_elems());
  const std::vector<float> q = random(len * q_heads * g.head_dim);
  std::vector<int32_t> table = {7, 0, 3, 9, 1, 4};    // shuffled slots out of 10
  std::vector<float> pool(10 * g.slot_elems(), NAN);  // unwritten K/V would poison the result
  std::vector<int64_t> token_slots(len);
  for (int64_t t = 0; t < len; ++t) token_slots[t] = table[t / 4] * 4 + t % 4;
  WriteKv(k.data(), v.data(), token_slots.data(), len, g, layer, pool.data());
  for (int64_t window : {int64_t{0}, int64_t{5}}) {
    const AttentionParams params{
        .kv = g, .layer = layer, .q_heads = q_heads, .scale = 0.3f, .sliding_window = window};
    // Prefill of the last len - prefix tokens over a cached prefix of `prefix` tokens.
    const int32_t q_indptr[2] = {0, static_cast<int32_t>(len - prefix)};
    const int32_t kv_len = len;
    const int64_t row = q_heads * g.head_dim;
    std::vector<float> out((len - prefix) * row);
    AttentionPrefill(params, q.data() + prefix * row, q_indptr, &kv_len, table.data(), blocks, 1,
                     pool.data(), out.data());
    for (int64_t i = 0; i < len - prefix; ++i) {
      const std::vector<float> qi(q.begin() + (prefix + i) * row,
                                  q.begin() + (prefix + i + 1) * row);
      const std::vector<float> want = Dense(qi, k, v, prefix + i, q_heads, 2, 8, window, 0.3f);
      for (int64_t j = 0; j < row; ++j) ASSERT_NEAR(out[i * row + j], want[j], 1e-5) << i;
    }
    // Decode of the last token reads the same as the prefill's last row.
    std::vector<float> dec(row);
    AttentionDecode(params, q.data() + (len - 1) * row, &kv_len, table.data(), blocks, 1,
                    pool.data(), dec.data());
    for (int64_t j = 0; j < row; ++j) EXPECT_EQ(dec[j], out[(len - prefix - 1) * row + j]);
  }
}

}  // namespace
}  // namespace kvtier::ops::ref
