// Attention over K/V held in the paged pool (paged_kv.h), as transformers' eager attention computes
// it: softmax(q k^T * scale + mask) v, per query head, with grouped-query attention (query head h
// reads KV head h / (q_heads / kv_heads)), a causal mask and an optional sliding window (query at
// position p sees keys at positions max(0, p - window + 1) .. p; window 0 means no window).
//
// A sequence's K/V for every position the queries may see must already be in the pool
// (ref::WriteKv the new tokens first): its first kv_len - q_len tokens are a cached prefix — e.g.
// blocks found in the daemon — and its last q_len tokens are the queries' own.
//
// Batched over sequences flashinfer-style, with ragged query counts in prefill.
#pragma once

#include <cstdint>

#include "kernels/ops/paged_kv.h"

namespace kvtier::ops {

struct AttentionParams {
  PagedKvGeometry kv;
  int64_t layer = 0;
  int64_t q_heads = 0;         // a multiple of kv.kv_heads
  float scale = 0;             // usually 1 / sqrt(head_dim)
  int64_t sliding_window = 0;  // 0: full causal attention
};

namespace ref {

// Prefill (or a chunk of it) for `batch` sequences.
// q            [total_q, q_heads, head_dim]  total_q = q_indptr[batch]
// q_indptr     [batch + 1]  sequence b's queries are rows q_indptr[b] .. q_indptr[b+1] - 1, its
//                           last (q_indptr[b+1] - q_indptr[b]) tokens
// kv_lens      [batch]      tokens of sequence b with K/V in the pool, >= its query count
// block_tables [batch, max_blocks]  slot of block j of sequence b at [b * max_blocks + j];
//                           ceil(kv_lens[b] / block_tokens) <= max_blocks entries used
// pool         [num_slots, slot_elems]
// out          [total_q, q_heads, head_dim]
void AttentionPrefill(const AttentionParams& params, const float* q, const int32_t* q_indptr,
                      const int32_t* kv_lens, const int32_t* block_tables, int64_t max_blocks,
                      int64_t batch, const float* pool, float* out);

// Decode: one query per sequence, at position kv_lens[b] - 1.
// q            [batch, q_heads, head_dim]
// kv_lens      [batch]  >= 1
// block_tables [batch, max_blocks]
// out          [batch, q_heads, head_dim]
void AttentionDecode(const AttentionParams& params, const float* q, const int32_t* kv_lens,
                     const int32_t* block_tables, int64_t max_blocks, int64_t batch,
                     const float* pool, float* out);

}  // namespace ref
}  // namespace kvtier::ops
