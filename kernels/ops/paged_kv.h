// The engine's KV pool in the daemon's payload layout (DESIGN.md "Words": payload): the pool is an
// array of slots, one slot per block of block_tokens tokens, each slot laid out block-major
//   [layer][k,v][token][kv_head][head_dim]
// so a slot is exactly one payload, attended where it lies (a T0 slot needs no copy). A sequence
// names its blocks by a block table: block j of the sequence (its tokens j*block_tokens ..
// (j+1)*block_tokens - 1) is in slot block_table[j].
//
// Thread-safety: plain data and pure functions.
#pragma once

#include <cstdint>

namespace kvtier::ops {

struct PagedKvGeometry {
  int64_t layers = 0;
  int64_t block_tokens = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;

  // Elements of one (token) row of all heads: kv_heads * head_dim.
  int64_t token_elems() const { return kv_heads * head_dim; }
  // Elements of one slot: layers * 2 * block_tokens * kv_heads * head_dim.
  int64_t slot_elems() const { return layers * 2 * block_tokens * token_elems(); }
  // Offset of K (kv = 0) or V (kv = 1) of `token` (0 <= token < block_tokens), head 0, in `slot`.
  int64_t Offset(int64_t slot, int64_t layer, int kv, int64_t token) const {
    return slot * slot_elems() + ((layer * 2 + kv) * block_tokens + token) * token_elems();
  }
};

namespace ref {

// Stores the K and V of n new tokens of one layer into the pool (vLLM's reshape_and_cache).
// k, v        [n, kv_heads, head_dim]
// token_slots [n]  where token i goes: slot token_slots[i] / block_tokens, row
//                  token_slots[i] % block_tokens of that slot
// pool        [num_slots, slot_elems] (geometry above); precondition: every slot in range
void WriteKv(const float* k, const float* v, const int64_t* token_slots, int64_t n,
             const PagedKvGeometry& geometry, int64_t layer, float* pool);

}  // namespace ref
}  // namespace kvtier::ops
