// What the two Hopper prefill kernels share (attention_prefill_wgmma_kernel.cu, every thread loads
// and computes; attention_prefill_wgmma_ws_kernel.cu, a producer warpgroup loads): the block's
// geometry, staging of Q and K/V tiles from the paged pool by cp.async, the online softmax of one
// warpgroup's 64 x 128 score tile and the output store. Thread indices are passed in (`tid`: the
// thread's index among those doing the work), so either kernel's thread layout fits. With
// a.kv_splits > 1 a block computes one run of its key tiles (attention_split.cuh) and stores
// partial results. Included by
// those two files alone; sm_90a code.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/attention_prefill_wgmma.cuh"
#include "kernels/ops/gpu/attention_split.cuh"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch::wgmma {

constexpr int kD = 128;
constexpr int kRows = 128;       // query rows per block, 64 per consumer warpgroup
constexpr int kKeys = 128;       // keys per tile
constexpr int kChunks = kD / 8;  // 16-byte chunks per row
constexpr uint32_t kTileBytes = kKeys * kD * 2;
constexpr uint32_t kQBytes = kRows * kD * 2;
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kRows == kKeys,
              "Q and K tiles share one half stride (kk / 4 * 128 rows * 128 bytes)");

// Where a thread's K and V rows are: its 16-byte chunk of each row, in the pool's slots.
struct KvSource {
  const uint16_t* base;  // pool + this layer's K + kv_head * D + the thread's chunk
  const int32_t* table;  // the sequence's block table
  int64_t slot_elems;
  int64_t token_elems;
  int64_t v_offset;  // V minus K of the same token, elements
  int block_tokens;
  int shift;  // log2(block_tokens), -1 when not a power of two
  int kv_len;
};

__device__ __forceinline__ KvSource MakeKvSource(const AttentionArgs& a, int64_t b, int64_t kv_head,
                                                 int chunk) {
  KvSource s;
  s.token_elems = a.kv.kv_heads * kD;
  s.block_tokens = static_cast<int>(a.kv.block_tokens);
  s.slot_elems = a.kv.layers * 2 * a.kv.block_tokens * s.token_elems;
  s.v_offset = a.kv.block_tokens * s.token_elems;
  s.base = a.pool + a.layer * 2 * s.v_offset + kv_head * kD + chunk * 8;
  s.table = a.block_tables + b * a.max_blocks;
  s.shift = (s.block_tokens & (s.block_tokens - 1)) == 0 ? __ffs(s.block_tokens) - 1 : -1;
  s.kv_len = a.kv_lens[b];
  return s;
}

__device__ __forceinline__ const uint16_t* KeyRow(const KvSource& s, int t) {
  int blk, off;
  if (s.shift >= 0) {
    blk = t >> s.shift;
    off = t & (s.block_tokens - 1);
  } else {
    blk = t / s.block_tokens;
    off = t - blk * s.block_tokens;
  }
  return s.base + static_cast<int64_t>(s.table[blk]) * s.slot_elems +
         static_cast<int64_t>(off) * s.token_elems;
}

// Starts staging K and V of keys [t0, t0 + kKeys) into the tiles at k_smem and v_smem, kThreads
// threads each taking chunk tid % kChunks of every (kThreads / kChunks)-th row; zeros past kv_len,
// so no stale row of shared memory, NaN or not, reaches P V. A thread's rows kThreads / kChunks
// apart share a pool block unless the step crosses the block's end, so the block table is read
// once per block, not once per row (block sizes a power of two; others look up every row).
template <int kThreads>
__device__ __forceinline__ void IssueTile(const KvSource& s, int t0, uint32_t k_smem,
                                          uint32_t v_smem, int tid) {
  constexpr int kPassRows = kThreads / kChunks;
  const int chunk = tid % kChunks;
  const uint16_t* k = s.base;
#pragma unroll
  for (int i = 0; i < kKeys / kPassRows; ++i) {
    const int r = tid / kChunks + i * kPassRows;
    const int t = t0 + r;
    const bool valid = t < s.kv_len;  // rows only grow: once past kv_len, k is never read
    if (i == 0 || s.shift < 0 || (t & (s.block_tokens - 1)) < kPassRows) {
      k = valid ? KeyRow(s, t) : s.base;
    } else {
      k += kPassRows * s.token_elems;
    }
    const uint32_t at = SwizzledOffset(kKeys, r, chunk);
    CpAsync16(k_smem + at, valid ? k : s.base, valid);
    CpAsync16(v_smem + at, valid ? k + s.v_offset : s.base, valid);
  }
}

// The block's rows: (token, query head of the group) pairs in token-major order, kRows from row0.
struct Block {
  int64_t b, kv_head, group, q_begin, rows, row0;
  int64_t first_pos;  // position of the sequence's first query token
  int key_lo;         // first key tile's start
  int pos_hi;         // last key any row of the block sees
};

// The block of grid index `tile` along x (longest causal rows first: the last rows of the sequence
// go to the first blocks; each tile's splits side by side) of sequence blockIdx.z and KV head
// blockIdx.y; false when it is past the sequence's rows, or when its split has no key tile (its
// rows' partial results are then marked empty). Every thread of the block calls it.
__device__ __forceinline__ bool MakeBlock(const AttentionArgs& a, const int32_t* q_indptr,
                                          Block& blk) {
  blk.b = blockIdx.z;
  blk.kv_head = blockIdx.y;
  blk.group = a.q_heads / a.kv.kv_heads;
  blk.q_begin = q_indptr[blk.b];
  const int64_t q_len = q_indptr[blk.b + 1] - blk.q_begin;
  blk.rows = q_len * blk.group;
  blk.row0 = split::Tile(a) * kRows;
  if (blk.row0 >= blk.rows) return false;
  blk.first_pos = a.kv_lens[blk.b] - q_len;
  // Keys the block's rows see: from its first row's window start to its last row's position.
  const int64_t last_row = (blk.row0 + kRows < blk.rows ? blk.row0 + kRows : blk.rows) - 1;
  blk.pos_hi = static_cast<int>(blk.first_pos + last_row / blk.group);
  const int pos_lo = static_cast<int>(blk.first_pos + blk.row0 / blk.group);
  const int key_lo = a.sliding_window > 0 ? pos_lo - static_cast<int>(a.sliding_window) + 1 : 0;
  blk.key_lo = key_lo > 0 ? key_lo / kKeys * kKeys : 0;
  if (split::NarrowKeys(a, kKeys, blk.key_lo, blk.pos_hi)) return true;
  split::MarkEmpty(a, blk.q_begin, blk.rows, blk.row0, kRows, blk.group, blk.kv_head);
  return false;
}

// Which key tiles rows [first, first + count) of the block see whole: a tile of keys from t0
// needs no mask when t0 + kKeys - 1 <= pos_lo and t0 >= lo_hi (rows past the sequence are never
// stored, so they do not count; when every row is past it, every tile is masked).
struct Whole {
  int pos_lo;  // first row's position
  int lo_hi;   // last row's first visible key
  __device__ __forceinline__ bool Tile(int t0) const {
    return t0 + kKeys - 1 <= pos_lo && t0 >= lo_hi;
  }
};

__device__ __forceinline__ Whole WholeTiles(const AttentionArgs& a, const Block& blk, int64_t first,
                                            int64_t count) {
  Whole w;
  const int64_t row_lo = blk.row0 + first;
  if (row_lo >= blk.rows) return Whole{-(1 << 30), 1 << 30};
  const int64_t row_hi = (row_lo + count < blk.rows ? row_lo + count : blk.rows) - 1;
  w.pos_lo = static_cast<int>(blk.first_pos + row_lo / blk.group);
  const int pos_hi = static_cast<int>(blk.first_pos + row_hi / blk.group);
  w.lo_hi = a.sliding_window > 0 ? pos_hi - static_cast<int>(a.sliding_window) + 1 : 0;
  return w;
}

// Starts staging query rows [r_begin, r_begin + kCount) of the block's Q tile (zeros past the
// sequence), kThreads threads.
template <int kThreads, int kCount>
__device__ __forceinline__ void IssueQ(const AttentionArgs& a, const Block& blk, uint32_t q_smem,
                                       int r_begin, int tid) {
  constexpr int kPassRows = kThreads / kChunks;
  const int chunk = tid % kChunks;
#pragma unroll
  for (int i = 0; i < kCount / kPassRows; ++i) {
    const int r = r_begin + tid / kChunks + i * kPassRows;
    const int64_t row = blk.row0 + r;
    const bool valid = row < blk.rows;
    const uint16_t* src = a.q;
    if (valid) {
      const int64_t head = blk.kv_head * blk.group + row % blk.group;
      src = a.q + (blk.q_begin + row / blk.group) * a.q_token_stride + head * kD + chunk * 8;
    }
    CpAsync16(q_smem + SwizzledOffset(kRows, r, chunk), src, valid);
  }
}

template <typename Fmt>
__device__ __forceinline__ uint32_t Pack(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<Fmt, dev::Bf16>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// A thread's two query rows (lane / 4 and lane / 4 + 8 of its warp's 16): positions, first
// visible keys, running max (raw scores) and this lane's share of the sum.
struct Rows {
  int pos[2];
  int lo[2];
  float m[2];
  float l[2];
};

// ctid: the thread's index among the consumer threads (warp w of them owns rows 16w..16w + 15).
__device__ __forceinline__ Rows InitRows(const AttentionArgs& a, const Block& blk, int ctid) {
  Rows r;
  const int lane = ctid % dev::kWarpSize;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = blk.row0 + ctid / dev::kWarpSize * 16 + lane / 4 + h * 8;
    r.pos[h] = row < blk.rows ? static_cast<int>(blk.first_pos + row / blk.group) : -1;
    r.lo[h] = a.sliding_window > 0 ? r.pos[h] - static_cast<int>(a.sliding_window) + 1 : 0;
    r.m[h] = -INFINITY;
    r.l[h] = 0;
  }
  return r;
}

// Masks the tile of keys from t0 (kMask: some key is hidden from some row), updates the rows' max
// and sum (4 lanes share a row) and turns the scores into probabilities in place. Returns in
// alpha the factors O's rows must be scaled by. scale: softmax scale times log2(e), > 0.
template <bool kMask>
__device__ __forceinline__ void Softmax(float (&s)[64], Rows& r, int t0, float scale, int lane,
                                        float (&alpha)[2]) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int h = i % 4 / 2;
    if (kMask) {
      const int key = t0 + i / 4 * 8 + (lane % 4) * 2 + i % 2;
      if (key > r.pos[h] || key < r.lo[h]) s[i] = -INFINITY;
    }
    mx[h] = fmaxf(mx[h], s[i]);
  }
  float bias[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(~0u, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(~0u, mx[h], 2));
    const float m_new = fmaxf(r.m[h], mx[h]);
    alpha[h] = m_new == -INFINITY ? 1.0f : Exp2((r.m[h] - m_new) * scale);
    bias[h] = m_new == -INFINITY ? 0.0f : m_new * scale;
    r.m[h] = m_new;
    r.l[h] *= alpha[h];
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int h = i % 4 / 2;
    s[i] = Exp2(fmaf(s[i], scale, -bias[h]));
    r.l[h] += s[i];
  }
}

__device__ __forceinline__ void Rescale(float (&o)[64], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] *= alpha[i % 4 / 2];
}

// P as A fragments of P V: the m16n8 accumulator layout is m16k16's A.
template <typename Fmt>
__device__ __forceinline__ void PackP(const float (&s)[64], uint32_t (&p)[kKeys / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    p[kk][0] = Pack<Fmt>(s[8 * kk + 0], s[8 * kk + 1]);
    p[kk][1] = Pack<Fmt>(s[8 * kk + 2], s[8 * kk + 3]);
    p[kk][2] = Pack<Fmt>(s[8 * kk + 4], s[8 * kk + 5]);
    p[kk][3] = Pack<Fmt>(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

// StoreRows of a split (a.kv_splits > 1): this split's normalized output and log2-sum-exp of the
// thread's rows (m is a raw score: scaled here).
__device__ __forceinline__ void StorePartialRows(const AttentionArgs& a, const Block& blk,
                                                 const Rows& r, const float (&o)[64], int ctid) {
  const int lane = ctid % dev::kWarpSize;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = r.l[h];
    l += __shfl_xor_sync(~0u, l, 1);
    l += __shfl_xor_sync(~0u, l, 2);
    const int64_t row = blk.row0 + ctid / dev::kWarpSize * 16 + lane / 4 + h * 8;
    if (row >= blk.rows) continue;
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    const int64_t head = blk.kv_head * blk.group + row % blk.group;
    const int64_t at = split::PartialAt(a, blk.q_begin + row / blk.group, head);
    if (lane % 4 == 0) {
      a.partial_lse[at] = l > 0 ? r.m[h] * (a.scale * kLog2e) + log2f(l) : -INFINITY;
    }
    float* po = a.partial_out + at * kD + (lane % 4) * 2;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      *reinterpret_cast<float2*>(po + n * 8) =
          make_float2(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
    }
  }
}

// Normalizes and writes a thread's part of its rows (rows past the sequence are skipped); with
// a.kv_splits > 1 its split's partial results instead.
template <typename Fmt>
__device__ __forceinline__ void StoreRows(const AttentionArgs& a, const Block& blk, const Rows& r,
                                          const float (&o)[64], int ctid) {
  if (a.kv_splits > 1) {
    StorePartialRows(a, blk, r, o, ctid);
    return;
  }
  const int lane = ctid % dev::kWarpSize;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = r.l[h];
    l += __shfl_xor_sync(~0u, l, 1);
    l += __shfl_xor_sync(~0u, l, 2);
    const int64_t row = blk.row0 + ctid / dev::kWarpSize * 16 + lane / 4 + h * 8;
    if (row >= blk.rows) continue;
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    const int64_t head = blk.kv_head * blk.group + row % blk.group;
    uint16_t* out =
        a.out + ((blk.q_begin + row / blk.group) * a.q_heads + head) * kD + (lane % 4) * 2;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      *reinterpret_cast<uint32_t*>(out + n * 8) =
          Pack<Fmt>(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
    }
  }
}

// S (64 x 128) = Q rows of a warpgroup (q_wg) times the K tile (k_smem)^T, issued, not waited for.
template <typename Fmt>
__device__ __forceinline__ void IssueQk(float (&s)[64], uint32_t q_wg, uint32_t k_smem) {
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t at = kk / 4 * 128 * 128 + kk % 4 * 32;  // half of the row, 16 columns in it
    MmaSs<Fmt>(s, Descriptor(q_wg + at, 16, 1024), Descriptor(k_smem + at, 16, 1024), kk > 0);
  }
}

// O (64 x 128) += P (registers) times the V tile (v_smem), issued, not waited for.
template <typename Fmt>
__device__ __forceinline__ void IssuePv(float (&o)[64], const uint32_t (&p)[kKeys / 16][4],
                                        uint32_t v_smem) {
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    MmaRs<Fmt>(o, p[kk], Descriptor(v_smem + kk * 16 * 128, kKeys * 128, 1024));
  }
}

}  // namespace kvtier::ops::gpu_launch::wgmma
