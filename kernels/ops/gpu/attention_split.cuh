// Internal to the prefill kernels (attention_prefill_*): their split over the keys
// (AttentionArgs::kv_splits, launch.h). The grid's x dimension is query tiles x kv_splits,
// tile-major, so the splits of one tile are neighbours; a block's keys — from its first key tile's
// start to the last position any of its rows sees — are cut into kv_splits runs of whole tiles,
// and the block computes its run alone. Rows mask keys exactly as without the split (the run only
// bounds which tiles are read), so a row's softmax over the run is the unsplit one restricted to
// it; AttentionCombine (launch.h) merges the runs by their log2-sum-exp.
#pragma once

#include <cstdint>

#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch::split {

// 32-bit arithmetic throughout: a 64-bit division is a subroutine call, whose spills the Hopper
// kernels' consumer warpgroups cannot afford.

// The query tile of this block, counted so that the last tile (the longest causal rows) comes
// first, as the kernels launch them.
__device__ __forceinline__ int64_t Tile(const AttentionArgs& a) {
  const auto splits = static_cast<unsigned>(a.kv_splits);
  return static_cast<int64_t>(gridDim.x / splits - 1 - blockIdx.x / splits);
}

__device__ __forceinline__ int Index(const AttentionArgs& a) {
  return static_cast<int>(blockIdx.x % static_cast<unsigned>(a.kv_splits));
}

// Narrows keys [key_lo, pos_hi] (key_lo a multiple of `tile`) to this block's run; false when the
// run is empty (the block has fewer tiles than splits), leaving them unchanged.
template <typename Int>
__device__ __forceinline__ bool NarrowKeys(const AttentionArgs& a, int tile, Int& key_lo,
                                           Int& pos_hi) {
  if (a.kv_splits == 1) return true;
  // Positions fit in 31 bits (kv_lens are int32).
  const int tiles = (static_cast<int>(pos_hi) - static_cast<int>(key_lo)) / tile + 1;
  const int per = (tiles + a.kv_splits - 1) / a.kv_splits;
  const int first = Index(a) * per;
  if (first >= tiles) return false;
  const int lo = static_cast<int>(key_lo) + first * tile;
  const int hi = lo + per * tile - 1;
  key_lo = lo;
  pos_hi = hi < pos_hi ? hi : pos_hi;
  return true;
}

// Where (row, head)'s partial result of this block's split goes: partial_out[at * head_dim ..],
// partial_lse[at]. row: the query token's index in q (q_indptr[b] + token).
__device__ __forceinline__ int64_t PartialAt(const AttentionArgs& a, int64_t row, int64_t head) {
  return (row * a.q_heads + head) * a.kv_splits + Index(a);
}

// For a block whose run is empty: every (row, head) of rows [row0, row0 + count) of the sequence
// (rows being (token, query head of the group) pairs from q_begin) saw no key in this split.
__device__ __forceinline__ void MarkEmpty(const AttentionArgs& a, int64_t q_begin, int64_t rows,
                                          int64_t row0, int64_t count, int64_t group,
                                          int64_t kv_head) {
  const auto g = static_cast<int>(group);  // 32-bit: see above
  const int n = static_cast<int>(rows - row0 < count ? rows - row0 : count);
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    const int row = static_cast<int>(row0) + r;
    a.partial_lse[PartialAt(a, q_begin + row / g, kv_head * group + row % g)] = -INFINITY;
  }
}

}  // namespace kvtier::ops::gpu_launch::split
