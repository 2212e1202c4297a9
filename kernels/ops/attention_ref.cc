#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops/attention.h"

namespace kvtier::ops::ref {
namespace {

// One query head of one token at `pos`, against the sequence's keys [first, pos].
// q [head_dim]; out [head_dim]; scores is scratch of at least pos + 1 floats.
void AttendOne(const AttentionParams& p, const float* q, int64_t kv_head, int64_t pos,
               const int32_t* block_table, const float* pool, std::vector<float>& scores,
               float* out) {
  const PagedKvGeometry& g = p.kv;
  const int64_t d = g.head_dim;
  const int64_t first = p.sliding_window > 0 ? std::max<int64_t>(0, pos - p.sliding_window + 1) : 0;
  auto row = [&](int kv, int64_t t) {
    return pool + g.Offset(block_table[t / g.block_tokens], p.layer, kv, t % g.block_tokens) +
           kv_head * d;
  };
  float max_score = -INFINITY;
  for (int64_t t = first; t <= pos; ++t) {
    const float* k = row(0, t);
    double dot = 0;
    for (int64_t j = 0; j < d; ++j) dot += static_cast<double>(q[j]) * k[j];
    scores[t] = static_cast<float>(dot) * p.scale;
    max_score = std::max(max_score, scores[t]);
  }
  double denom = 0;
  for (int64_t t = first; t <= pos; ++t) {
    scores[t] = std::exp(scores[t] - max_score);
    denom += scores[t];
  }
  std::vector<double> acc(d, 0.0);
  for (int64_t t = first; t <= pos; ++t) {
    const float* v = row(1, t);
    for (int64_t j = 0; j < d; ++j) acc[j] += static_cast<double>(scores[t]) * v[j];
  }
  for (int64_t j = 0; j < d; ++j) out[j] = static_cast<float>(acc[j] / denom);
}

// Every head of one token of one sequence.
void AttendToken(const AttentionParams& p, const float* q, int64_t pos, const int32_t* block_table,
                 const float* pool, std::vector<float>& scores, float* out) {
  const int64_t group = p.q_heads / p.kv.kv_heads;
  const int64_t d = p.kv.head_dim;
  if (static_cast<int64_t>(scores.size()) < pos + 1) scores.resize(pos + 1);
  for (int64_t h = 0; h < p.q_heads; ++h) {
    AttendOne(p, q + h * d, h / group, pos, block_table, pool, scores, out + h * d);
  }
}

}  // namespace

void AttentionPrefill(const AttentionParams& params, const float* q, const int32_t* q_indptr,
                      const int32_t* kv_lens, const int32_t* block_tables, int64_t max_blocks,
                      int64_t batch, const float* pool, float* out) {
  const int64_t row = params.q_heads * params.kv.head_dim;
  std::vector<float> scores;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t q_len = q_indptr[b + 1] - q_indptr[b];
    const int64_t start = kv_lens[b] - q_len;  // position of the first query
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t r = q_indptr[b] + i;
      AttendToken(params, q + r * row, start + i, block_tables + b * max_blocks, pool, scores,
                  out + r * row);
    }
  }
}

void AttentionDecode(const AttentionParams& params, const float* q, const int32_t* kv_lens,
                     const int32_t* block_tables, int64_t max_blocks, int64_t batch,
                     const float* pool, float* out) {
  const int64_t row = params.q_heads * params.kv.head_dim;
  std::vector<float> scores;
  for (int64_t b = 0; b < batch; ++b) {
    AttendToken(params, q + b * row, kv_lens[b] - 1, block_tables + b * max_blocks, pool, scores,
                out + b * row);
  }
}

}  // namespace kvtier::ops::ref
