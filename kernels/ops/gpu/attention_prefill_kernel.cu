// Device side of AttentionPrefill (kernels/ops/gpu/attention_gpu.h): flash-attention style — keys
// and values stream through shared memory one tile at a time, softmax is computed online (running
// max and sum per query row, the accumulator rescaled when the max grows), and no score matrix is
// ever written out. K/V are read in place from the pool's block-major slots through the block
// table.
//
// Work split: a thread block owns kRowsPerBlock query rows of one sequence and one KV head, rows
// being (token, query head of the KV head's group) pairs in token-major order, so every K/V tile it
// loads serves the whole GQA group. Each warp owns kRowsPerWarp of those rows. A key tile is
// kWarpSize keys: for scores, lane j computes key j's dot product with each of the warp's rows
// (queries broadcast from shared memory, keys read conflict-free from a padded tile); for the
// output, lane l owns dims {2l, 2l+1} (+ 2*kWarpSize ...) and reads the tile's probabilities back
// from shared memory. Blocks are launched heaviest first (the causal mask makes later query tiles
// longer). Scores use exp2 with log2(e) folded into the query scale. With a.kv_splits > 1 each
// block computes one run of its key tiles (attention_split.cuh) and writes partial results.
//
// SIMT float32 arithmetic, so the same source runs on every vendor and head size; where the device
// has warp-level matrix multiply, attention_prefill_mma_kernel.cu serves head_dim 64 and 128.
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/attention_split.cuh"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch {
namespace {

using dev::kWarpSize;

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 8;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kKeyTile = kWarpSize;
constexpr float kLog2e = 1.4426950408889634f;

// Shared memory of one block for head_dim D: queries as float (pre-scaled), K and V tiles as
// 16-bit words; K rows padded by one 32-bit word so lane j's reads of row j hit distinct banks.
template <int D>
struct alignas(16) PrefillSmem {
  static constexpr int kKStride = D / 2 + 1;  // 32-bit words per K row
  float q[kRowsPerBlock][D];
  uint32_t k[kKeyTile][kKStride];
  uint32_t v[kKeyTile][D / 2];
  float p[kWarps][kKeyTile][kRowsPerWarp];
};

// Address of K (kv = 0) or V (kv = 1) of token t of sequence b, head `kv_head`.
__device__ __forceinline__ const uint16_t* KvRow(const AttentionArgs& a, const int32_t* table,
                                                 int kv, int64_t t, int64_t kv_head) {
  const KvGeometry& g = a.kv;
  const int64_t token_elems = g.kv_heads * g.head_dim;
  // Positions fit in 32 bits (kv_lens are int32): 32-bit division is far cheaper than 64-bit.
  const auto pos = static_cast<uint32_t>(t);
  const auto block_tokens = static_cast<uint32_t>(g.block_tokens);
  const int64_t slot = table[pos / block_tokens];
  const int64_t slot_elems = g.layers * 2 * g.block_tokens * token_elems;
  return a.pool + slot * slot_elems +
         ((a.layer * 2 + kv) * g.block_tokens + pos % block_tokens) * token_elems +
         kv_head * g.head_dim;
}

// Loads keys [t0, t0 + kKeyTile) into the K and V tiles (zeros past kv_len).
template <int D>
__device__ void LoadKvTile(const AttentionArgs& a, const int32_t* table, int64_t kv_head,
                           int64_t t0, int64_t kv_len, PrefillSmem<D>& s) {
  constexpr int kWordsPerRow = D / 2;
  constexpr int kChunks = kKeyTile * kWordsPerRow / 4;  // 16-byte chunks per tile
  for (int c = threadIdx.x; c < kChunks; c += blockDim.x) {
    const int key = c / (kWordsPerRow / 4);
    const int word = c % (kWordsPerRow / 4) * 4;
    uint4 kk = make_uint4(0, 0, 0, 0);
    uint4 vv = make_uint4(0, 0, 0, 0);
    if (t0 + key < kv_len) {
      kk = *reinterpret_cast<const uint4*>(KvRow(a, table, 0, t0 + key, kv_head) + word * 2);
      vv = *reinterpret_cast<const uint4*>(KvRow(a, table, 1, t0 + key, kv_head) + word * 2);
    }
    s.k[key][word] = kk.x;
    s.k[key][word + 1] = kk.y;
    s.k[key][word + 2] = kk.z;
    s.k[key][word + 3] = kk.w;
    *reinterpret_cast<uint4*>(&s.v[key][word]) = vv;
  }
}

template <typename Fmt>
__device__ __forceinline__ void Unpack(uint32_t w, float& lo, float& hi) {
  lo = Fmt::ToFloat(static_cast<uint16_t>(w & 0xffffu));
  hi = Fmt::ToFloat(static_cast<uint16_t>(w >> 16));
}

// Where a block's rows are: sequence b's rows row0 .. row0 + kRowsPerBlock - 1 of `rows`.
struct BlockRows {
  int64_t q_begin;  // the sequence's first query row in q / out
  int64_t rows;     // its (token, head) rows: q_len * group
  int64_t row0;     // this block's first
  int64_t group;    // query heads per KV head
  int64_t kv_head;
  int64_t first_pos;  // position of the sequence's first query
};

// The state of one warp's kRowsPerWarp rows: position, first visible key, running max, this lane's
// share of the running sum, and the lane's dims of the output accumulator.
template <int D>
struct WarpRows {
  static constexpr int kDimChunks = (D / 2 + kWarpSize - 1) / kWarpSize;  // dim pairs per lane
  int64_t pos[kRowsPerWarp];
  int64_t lo[kRowsPerWarp];
  float m[kRowsPerWarp];
  float l[kRowsPerWarp];
  float acc[kRowsPerWarp][kDimChunks][2];
};

// The block's queries into shared memory, scaled by scale * log2(e) (zeros past the sequence).
template <typename Fmt, int D>
__device__ void LoadQueries(const AttentionArgs& a, const BlockRows& br, PrefillSmem<D>& s) {
  const float qscale = a.scale * kLog2e;
  for (int i = threadIdx.x; i < kRowsPerBlock * D; i += blockDim.x) {
    const int r = i / D;
    const int64_t row = br.row0 + r;
    float v = 0;
    if (row < br.rows) {
      const int64_t token = row / br.group;
      const int64_t head = br.kv_head * br.group + row % br.group;
      v = Fmt::ToFloat(a.q[(br.q_begin + token) * a.q_token_stride + head * D + i % D]) * qscale;
    }
    s.q[r][i % D] = v;
  }
}

template <int D>
__device__ void InitRows(const AttentionArgs& a, const BlockRows& br, WarpRows<D>& w) {
  const int warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = br.row0 + warp * kRowsPerWarp + r;
    w.pos[r] = row < br.rows ? br.first_pos + row / br.group : -1;  // -1: sees nothing
    w.lo[r] = a.sliding_window > 0 ? w.pos[r] - a.sliding_window + 1 : 0;
    w.m[r] = -INFINITY;
    w.l[r] = 0;
#pragma unroll
    for (int c = 0; c < WarpRows<D>::kDimChunks; ++c) w.acc[r][c][0] = w.acc[r][c][1] = 0;
  }
}

// Scores of the tile's keys (lane = key) for the warp's rows, online softmax update, and the
// probabilities into s.p for AccumulateTile.
template <typename Fmt, int D>
__device__ __forceinline__ void ScoreTile(int64_t t0, PrefillSmem<D>& s, WarpRows<D>& w) {
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float sc[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) sc[r] = 0;
  for (int d = 0; d < D; d += 4) {
    float k0, k1, k2, k3;
    Unpack<Fmt>(s.k[lane][d / 2], k0, k1);
    Unpack<Fmt>(s.k[lane][d / 2 + 1], k2, k3);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float4 q = *reinterpret_cast<const float4*>(&s.q[warp * kRowsPerWarp + r][d]);
      sc[r] += q.x * k0 + q.y * k1 + q.z * k2 + q.w * k3;
    }
  }
  const int64_t key = t0 + lane;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const bool visible = key <= w.pos[r] && key >= w.lo[r];
    const float x = visible ? sc[r] : -INFINITY;
    const float m_new = fmaxf(w.m[r], dev::WarpMax(x));
    const float alpha = m_new == -INFINITY ? 1.0f : exp2f(w.m[r] - m_new);
    const float p = visible ? exp2f(x - m_new) : 0.0f;
    w.m[r] = m_new;
    w.l[r] = w.l[r] * alpha + p;
#pragma unroll
    for (int c = 0; c < WarpRows<D>::kDimChunks; ++c) {
      w.acc[r][c][0] *= alpha;
      w.acc[r][c][1] *= alpha;
    }
    s.p[warp][lane][r] = p;
  }
}

// acc += P V for the tile (lane = dim pairs).
template <typename Fmt, int D>
__device__ __forceinline__ void AccumulateTile(const PrefillSmem<D>& s, WarpRows<D>& w) {
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int j = 0; j < kKeyTile; ++j) {
    float p[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; r += 4) {
      const float4 p4 = *reinterpret_cast<const float4*>(&s.p[warp][j][r]);
      p[r] = p4.x;
      p[r + 1] = p4.y;
      p[r + 2] = p4.z;
      p[r + 3] = p4.w;
    }
#pragma unroll
    for (int c = 0; c < WarpRows<D>::kDimChunks; ++c) {
      const int word = lane + c * kWarpSize;
      if (word < D / 2) {
        float v0, v1;
        Unpack<Fmt>(s.v[j][word], v0, v1);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          w.acc[r][c][0] += p[r] * v0;
          w.acc[r][c][1] += p[r] * v1;
        }
      }
    }
  }
}

template <typename Fmt, int D>
__device__ void StoreRows(const AttentionArgs& a, const BlockRows& br, const WarpRows<D>& w) {
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = br.row0 + warp * kRowsPerWarp + r;
    const float total = dev::WarpSum(w.l[r]);
    if (row >= br.rows) continue;
    const float inv = total > 0 ? 1.0f / total : 0.0f;
    const int64_t token = row / br.group;
    const int64_t head = br.kv_head * br.group + row % br.group;
    if (a.kv_splits > 1) {  // this split's normalized output and log2-sum-exp (m is log2-scaled)
      const int64_t at = split::PartialAt(a, br.q_begin + token, head);
      if (lane == 0) a.partial_lse[at] = total > 0 ? w.m[r] + log2f(total) : -INFINITY;
#pragma unroll
      for (int c = 0; c < WarpRows<D>::kDimChunks; ++c) {
        const int word = lane + c * kWarpSize;
        if (word < D / 2) {
          *reinterpret_cast<float2*>(a.partial_out + at * D + 2 * word) =
              make_float2(w.acc[r][c][0] * inv, w.acc[r][c][1] * inv);
        }
      }
      continue;
    }
    uint16_t* o = a.out + ((br.q_begin + token) * a.q_heads + head) * D;
#pragma unroll
    for (int c = 0; c < WarpRows<D>::kDimChunks; ++c) {
      const int word = lane + c * kWarpSize;
      if (word < D / 2) {
        const uint32_t packed = static_cast<uint32_t>(Fmt::FromFloat(w.acc[r][c][0] * inv)) |
                                static_cast<uint32_t>(Fmt::FromFloat(w.acc[r][c][1] * inv)) << 16;
        *reinterpret_cast<uint32_t*>(o + 2 * word) = packed;
      }
    }
  }
}

template <typename Fmt, int D>
__global__ void __launch_bounds__(kWarps* kWarpSize)
    PrefillKernel(AttentionArgs a, const int32_t* q_indptr) {
  __shared__ PrefillSmem<D> s;
  const int64_t b = blockIdx.z;
  BlockRows br;
  br.kv_head = blockIdx.y;
  br.group = a.q_heads / a.kv.kv_heads;
  br.q_begin = q_indptr[b];
  const int64_t q_len = q_indptr[b + 1] - br.q_begin;
  br.rows = q_len * br.group;
  br.row0 = split::Tile(a) * kRowsPerBlock;
  if (br.row0 >= br.rows) return;
  const int64_t kv_len = a.kv_lens[b];
  br.first_pos = kv_len - q_len;
  const int32_t* table = a.block_tables + b * a.max_blocks;
  // The block's key range: from the first key its first row may see to its last row's position,
  // then this split's run of it.
  const int64_t last_row =
      (br.row0 + kRowsPerBlock < br.rows ? br.row0 + kRowsPerBlock : br.rows) - 1;
  int64_t pos_hi = br.first_pos + last_row / br.group;
  int64_t key_lo =
      a.sliding_window > 0 ? br.first_pos + br.row0 / br.group - a.sliding_window + 1 : 0;
  key_lo = key_lo > 0 ? key_lo / kKeyTile * kKeyTile : 0;
  if (!split::NarrowKeys(a, kKeyTile, key_lo, pos_hi)) {
    split::MarkEmpty(a, br.q_begin, br.rows, br.row0, kRowsPerBlock, br.group, br.kv_head);
    return;
  }

  LoadQueries<Fmt, D>(a, br, s);
  WarpRows<D> w;
  InitRows<D>(a, br, w);
  for (int64_t t0 = key_lo; t0 <= pos_hi; t0 += kKeyTile) {
    __syncthreads();  // the previous tile is consumed (and the queries are stored)
    LoadKvTile<D>(a, table, br.kv_head, t0, kv_len, s);
    __syncthreads();
    ScoreTile<Fmt, D>(t0, s, w);
    __syncwarp();
    AccumulateTile<Fmt, D>(s, w);
    __syncwarp();
  }
  StoreRows<Fmt, D>(a, br, w);
}

template <typename Fmt, int D>
int Launch(const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len, void* stream) {
  const int64_t group = a.q_heads / a.kv.kv_heads;
  const int64_t tiles = (max_q_len * group + kRowsPerBlock - 1) / kRowsPerBlock;
  const dim3 grid(static_cast<unsigned>(tiles * a.kv_splits), static_cast<unsigned>(a.kv.kv_heads),
                  static_cast<unsigned>(a.batch));
  PrefillKernel<Fmt, D>
      <<<grid, kWarps * kWarpSize, 0, static_cast<cudaStream_t>(stream)>>>(a, q_indptr);
  return static_cast<int>(cudaGetLastError());
}

template <typename Fmt>
int LaunchFmt(const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len, void* stream) {
  switch (a.kv.head_dim) {
    case 16:
      return Launch<Fmt, 16>(a, q_indptr, max_q_len, stream);
    case 32:
      return Launch<Fmt, 32>(a, q_indptr, max_q_len, stream);
    case 64:
      return Launch<Fmt, 64>(a, q_indptr, max_q_len, stream);
    case 128:
      return Launch<Fmt, 128>(a, q_indptr, max_q_len, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);  // the wrapper admits only the cases above
  }
}

}  // namespace

int AttentionPrefill(bool bf16, const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len,
                     bool allow_mma, void* stream) {
  if (max_q_len <= 0 || a.batch <= 0) return 0;
  int code = allow_mma ? AttentionPrefillMma(bf16, a, q_indptr, max_q_len, stream) : kNoMmaKernel;
  if (code == kNoMmaKernel) {
    code = bf16 ? LaunchFmt<dev::Bf16>(a, q_indptr, max_q_len, stream)
                : LaunchFmt<dev::Fp16>(a, q_indptr, max_q_len, stream);
  }
  if (code != 0 || a.kv_splits == 1) return code;
  // Rows: the batch's query tokens, q_indptr[batch] of them, at most batch * max_q_len.
  return AttentionCombine(bf16, a.kv_splits, a.batch * max_q_len, q_indptr + a.batch, a.q_heads,
                          a.kv.head_dim, a.partial_out, a.partial_lse, a.out, stream);
}

}  // namespace kvtier::ops::gpu_launch
