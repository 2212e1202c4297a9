// Tensor-core variant of AttentionPrefill for targets with the warp-level 16-bit matrix multiply
// (PTX mma.sync.m16n8k16, NVIDIA sm_80 and later: KVTIER_HAS_PTX_MMA in kernels/device_caps.h);
// head_dim 64 or 128. Other targets and head sizes take the SIMT kernel
// (attention_prefill_kernel.cu), which states the semantics both compute.
//
// FlashAttention-2's structure: a thread block owns 128 query rows of one sequence and one KV
// head, rows being (token, query head of the group) pairs in token-major order (the GQA group
// shares every K/V tile), 32 rows per warp as two 16-row m-tiles, so every K and V fragment a warp
// loads from shared memory feeds two matrix multiplies (with 16 rows a warp, shared-memory loads
// bounded the kernel as much as the tensor cores did). Q stays in shared memory and its fragments
// are loaded per k-step; K and V tiles of 64 keys are staged in shared memory (rows padded by 16
// bytes so ldmatrix's eight rows hit distinct banks). S = Q K^T and O += P V run on tensor cores
// with float32 accumulators; the online softmax works on the accumulator fragments directly, and
// P is repacked into 16-bit A fragments in registers (the accumulator layout of m16n8 equals the A
// layout of m16k16), never leaving them. Tiles arrive by cp.async: V of a tile loads during its
// S = Q K^T, K of the next tile during its softmax and P V. Tiles that every row of the block sees
// whole skip the mask. With a.kv_splits > 1 a block computes one run of its key tiles
// (attention_split.cuh) and writes partial results.
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/attention_split.cuh"
#include "kernels/ops/gpu/launch.h"
#if defined(KVTIER_HAS_PTX_MMA)
#include "kernels/ops/gpu/attention_prefill_wgmma.h"
#endif

namespace kvtier::ops::gpu_launch {

#if defined(KVTIER_HAS_PTX_MMA)
namespace {

using dev::kWarpSize;
static_assert(kWarpSize == 32, "mma.sync fragments are laid out over a 32-lane warp");

constexpr int kWarps = 4;
constexpr int kMt = 2;                     // 16-row m-tiles per warp
constexpr int kWarpRows = 16 * kMt;        // query rows per warp
constexpr int kRows = kWarpRows * kWarps;  // query rows per block
constexpr int kKeys = 64;                  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
struct alignas(16) MmaSmem {
  static constexpr int kStride = D + 8;  // elements per padded row
  uint16_t q[kRows][kStride];
  uint16_t k[kKeys][kStride];
  uint16_t v[kKeys][kStride];
};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}

// c += a * b for one m16n8k16 tile, 16-bit inputs of the format, float32 accumulators.
template <typename Fmt>
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<Fmt, dev::Bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <typename Fmt>
__device__ __forceinline__ uint32_t Pack(float lo, float hi) {
  return static_cast<uint32_t>(Fmt::FromFloat(lo)) | static_cast<uint32_t>(Fmt::FromFloat(hi))
                                                         << 16;
}

__device__ __forceinline__ const uint16_t* KvRow(const AttentionArgs& a, const int32_t* table,
                                                 int kv, int64_t t, int64_t kv_head) {
  const KvGeometry& g = a.kv;
  const int64_t token_elems = g.kv_heads * g.head_dim;
  const auto pos = static_cast<uint32_t>(t);
  const auto block_tokens = static_cast<uint32_t>(g.block_tokens);
  const int64_t slot = table[pos / block_tokens];
  const int64_t slot_elems = g.layers * 2 * g.block_tokens * token_elems;
  return a.pool + slot * slot_elems +
         ((a.layer * 2 + kv) * g.block_tokens + pos % block_tokens) * token_elems +
         kv_head * g.head_dim;
}

// Asynchronous 16-byte copy global -> shared (sm_80+), zero-filled when !valid (src unread).
__device__ __forceinline__ void CpAsync16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Starts staging K (kv = 0) or V (kv = 1) of keys [t0, t0 + kKeys) into `tile` (zeros past
// kv_len), as one committed group; t0 < 0 commits an empty group (keeps the group count regular).
template <int D>
__device__ void IssueTile(const AttentionArgs& a, const int32_t* table, int kv, int64_t kv_head,
                          int64_t t0, int64_t kv_len, uint16_t (*tile)[MmaSmem<D>::kStride]) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  if (t0 >= 0) {
    for (int c = threadIdx.x; c < kKeys * kChunks; c += blockDim.x) {
      const int key = c / kChunks;
      const int col = c % kChunks * 8;
      const bool valid = t0 + key < kv_len;
      const uint16_t* src = valid ? KvRow(a, table, kv, t0 + key, kv_head) + col : a.pool;
      CpAsync16(&tile[key][col], src, valid);
    }
  }
  CpAsyncCommit();
}

// The block's kRows query rows into s.q (zeros past the sequence), where they stay.
template <int D>
__device__ void LoadQ(const AttentionArgs& a, int64_t q_begin, int64_t rows, int64_t row0,
                      int64_t group, int64_t kv_head, MmaSmem<D>& s) {
  constexpr int kChunks = D / 8;
  for (int c = threadIdx.x; c < kRows * kChunks; c += blockDim.x) {
    const int r = c / kChunks;
    const int col = c % kChunks * 8;
    uint4 q = make_uint4(0, 0, 0, 0);
    if (row0 + r < rows) {
      const int64_t token = (row0 + r) / group;
      const int64_t head = kv_head * group + (row0 + r) % group;
      q = *reinterpret_cast<const uint4*>(a.q + (q_begin + token) * a.q_token_stride + head * D +
                                          col);
    }
    *reinterpret_cast<uint4*>(&s.q[r][col]) = q;
  }
}

// This thread's four query rows (lane / 4 and lane / 4 + 8 of each of its warp's two m-tiles):
// positions, first visible keys, running max and (this lane's share of the) sum.
struct RowState {
  int pos[kMt][2];
  int lo[kMt][2];
  float m[kMt][2];
  float l[kMt][2];
};

// S = Q K^T for the staged K tile: per k-step, the warp's two Q fragments, then 8 n-tiles of 8
// keys, pairs loaded by one ldmatrix.x4 and used by both m-tiles.
template <typename Fmt, int D>
__device__ __forceinline__ void Scores(const MmaSmem<D>& s, float (&sc)[kMt][kKeys / 8][4]) {
  const int lane = threadIdx.x % kWarpSize;
  const int mtx = lane / 8;
  const int warp_row = threadIdx.x / kWarpSize * kWarpRows;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j)
      sc[mt][j][0] = sc[mt][j][1] = sc[mt][j][2] = sc[mt][j][3] = 0;
  }
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t qa[kMt][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      LdMatrixX4(qa[mt],
                 &s.q[warp_row + mt * 16 + (mtx % 2) * 8 + lane % 8][kk * 16 + (mtx / 2) * 8]);
    }
#pragma unroll
    for (int j = 0; j < kKeys / 8; j += 2) {
      uint32_t kb[4];
      LdMatrixX4(kb, &s.k[(j + mtx / 2) * 8 + lane % 8][kk * 16 + (mtx % 2) * 8]);
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        Mma<Fmt>(sc[mt][j], qa[mt], kb[0], kb[1]);
        Mma<Fmt>(sc[mt][j + 1], qa[mt], kb[2], kb[3]);
      }
    }
  }
}

// Masks the tile of keys from t0 (kMask: some key of the tile is hidden from some row of the
// block), updates the rows' running max and sum (4 lanes share a row), rescales the accumulator,
// and turns the scores into probabilities in place. One m-tile.
template <int D, bool kMask>
__device__ __forceinline__ void Softmax(float (&sc)[kKeys / 8][4], RowState& r, int mt, int t0,
                                        float scale, float (&o)[D / 8][4]) {
  const int lane = threadIdx.x % kWarpSize;
  float row_max[2] = {-INFINITY, -INFINITY};
  const int first_key = t0 + (lane % 4) * 2;
#pragma unroll
  for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      if (kMask) {
        const int key = first_key + j * 8 + e % 2;
        const bool visible = key <= r.pos[mt][h] && key >= r.lo[mt][h];
        sc[j][e] = visible ? sc[j][e] * scale : -INFINITY;
      } else {
        sc[j][e] *= scale;
      }
      row_max[h] = fmaxf(row_max[h], sc[j][e]);
    }
  }
  float alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(~0u, row_max[h], 1));
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(~0u, row_max[h], 2));
    const float m_new = fmaxf(r.m[mt][h], row_max[h]);
    alpha[h] = m_new == -INFINITY ? 1.0f : exp2f(r.m[mt][h] - m_new);
    r.m[mt][h] = m_new;
    r.l[mt][h] *= alpha[h];
  }
#pragma unroll
  for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sc[j][e] = sc[j][e] == -INFINITY ? 0.0f : exp2f(sc[j][e] - r.m[mt][e / 2]);
      r.l[mt][e / 2] += sc[j][e];  // this lane's share; summed across the 4 lanes at the end
    }
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    o[n][0] *= alpha[0];
    o[n][1] *= alpha[0];
    o[n][2] *= alpha[1];
    o[n][3] *= alpha[1];
  }
}

// O += P V: k-steps of 16 keys; V fragments by transposing ldmatrix, two dim n-tiles per load,
// each used by both m-tiles.
template <typename Fmt, int D>
__device__ __forceinline__ void AccumulatePv(const MmaSmem<D>& s,
                                             const float (&p)[kMt][kKeys / 8][4],
                                             float (&o)[kMt][D / 8][4]) {
  const int lane = threadIdx.x % kWarpSize;
  const int mtx = lane / 8;
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    uint32_t pa[kMt][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      pa[mt][0] = Pack<Fmt>(p[mt][2 * kk][0], p[mt][2 * kk][1]);
      pa[mt][1] = Pack<Fmt>(p[mt][2 * kk][2], p[mt][2 * kk][3]);
      pa[mt][2] = Pack<Fmt>(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
      pa[mt][3] = Pack<Fmt>(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      uint32_t vb[4];
      LdMatrixX4Trans(vb, &s.v[kk * 16 + (mtx % 2) * 8 + lane % 8][(n + mtx / 2) * 8]);
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        Mma<Fmt>(o[mt][n], pa[mt], vb[0], vb[1]);
        Mma<Fmt>(o[mt][n + 1], pa[mt], vb[2], vb[3]);
      }
    }
  }
}

// The row of m-tile mt, half h (of 8 rows) that this thread holds, counted from the block's first.
__device__ __forceinline__ int BlockRow(int mt, int h) {
  return threadIdx.x / kWarpSize * kWarpRows + mt * 16 + threadIdx.x % kWarpSize / 4 + h * 8;
}

// Normalizes and writes this thread's part of its rows (rows past the sequence are skipped).
template <typename Fmt, int D>
__device__ __forceinline__ void StoreRows(const AttentionArgs& a, int64_t q_begin, int64_t rows,
                                          int64_t row0, int64_t group, int64_t kv_head, RowState& r,
                                          const float (&o)[kMt][D / 8][4]) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = r.l[mt][h];
      l += __shfl_xor_sync(~0u, l, 1);
      l += __shfl_xor_sync(~0u, l, 2);
      const int64_t row = row0 + BlockRow(mt, h);
      if (row >= rows) continue;
      const float inv = l > 0 ? 1.0f / l : 0.0f;
      const int64_t token = row / group;
      const int64_t head = kv_head * group + row % group;
      if (a.kv_splits > 1) {  // this split's normalized output and log2-sum-exp (m is scaled)
        const int64_t at = split::PartialAt(a, q_begin + token, head);
        if (lane % 4 == 0) a.partial_lse[at] = l > 0 ? r.m[mt][h] + log2f(l) : -INFINITY;
        float* po = a.partial_out + at * D + (lane % 4) * 2;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          *reinterpret_cast<float2*>(po + n * 8) =
              make_float2(o[mt][n][2 * h] * inv, o[mt][n][2 * h + 1] * inv);
        }
        continue;
      }
      uint16_t* out = a.out + ((q_begin + token) * a.q_heads + head) * D + (lane % 4) * 2;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        *reinterpret_cast<uint32_t*>(out + n * 8) =
            Pack<Fmt>(o[mt][n][2 * h] * inv, o[mt][n][2 * h + 1] * inv);
      }
    }
  }
}

// Two blocks per multiprocessor (up to 255 registers a thread); Q, K and V in dynamic shared
// memory (69 KB at head_dim 128).
template <typename Fmt, int D>
__global__ void __launch_bounds__(kWarps* kWarpSize, 2)
    PrefillMmaKernel(AttentionArgs a, const int32_t* q_indptr) {
  extern __shared__ uint4 smem[];
  MmaSmem<D>& s = *reinterpret_cast<MmaSmem<D>*>(smem);
  const int64_t b = blockIdx.z;
  const int64_t kv_head = blockIdx.y;
  const int64_t group = a.q_heads / a.kv.kv_heads;
  const int64_t q_begin = q_indptr[b];
  const int64_t q_len = q_indptr[b + 1] - q_begin;
  const int64_t rows = q_len * group;
  const int64_t row0 = split::Tile(a) * kRows;
  if (row0 >= rows) return;
  const int64_t kv_len = a.kv_lens[b];
  const int64_t first_pos = kv_len - q_len;
  const int32_t* table = a.block_tables + b * a.max_blocks;
  // Keys the block's rows see: from its first row's window start to its last row's position, then
  // this split's run of them.
  const int64_t last_row = (row0 + kRows < rows ? row0 + kRows : rows) - 1;
  int pos_hi = static_cast<int>(first_pos + last_row / group);
  int key_lo =
      a.sliding_window > 0 ? static_cast<int>(first_pos + row0 / group - a.sliding_window + 1) : 0;
  key_lo = key_lo > 0 ? key_lo / kKeys * kKeys : 0;
  // A tile needs no mask when every row of the block sees all its keys: none past the first row's
  // position (rows past the sequence are never stored, so their scores do not matter), none
  // before the last row's window start.
  const int pos_lo = static_cast<int>(first_pos + row0 / group);
  const int lo_hi = a.sliding_window > 0 ? pos_hi - static_cast<int>(a.sliding_window) + 1 : 0;
  if (!split::NarrowKeys(a, kKeys, key_lo, pos_hi)) {
    split::MarkEmpty(a, q_begin, rows, row0, kRows, group, kv_head);
    return;
  }

  LoadQ<D>(a, q_begin, rows, row0, group, kv_head, s);
  RowState r;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + BlockRow(mt, h);
      r.pos[mt][h] = row < rows ? static_cast<int>(first_pos + row / group) : -1;
      r.lo[mt][h] =
          a.sliding_window > 0 ? r.pos[mt][h] - static_cast<int>(a.sliding_window) + 1 : 0;
      r.m[mt][h] = -INFINITY;
      r.l[mt][h] = 0;
    }
  }
  float o[kMt][D / 8][4] = {};

  // Pipeline: V of a tile loads while its scores are computed, K of the next tile while its
  // softmax and P V run.
  IssueTile<D>(a, table, 0, kv_head, key_lo, kv_len, s.k);
  for (int t0 = key_lo; t0 <= pos_hi; t0 += kKeys) {
    CpAsyncWait<0>();
    __syncthreads();  // K(t0) (and Q, first time) is in; every warp is done with V of the previous
    IssueTile<D>(a, table, 1, kv_head, t0, kv_len, s.v);
    float sc[kMt][kKeys / 8][4];
    Scores<Fmt, D>(s, sc);
    __syncthreads();  // every warp is done with K(t0)
    IssueTile<D>(a, table, 0, kv_head, t0 + kKeys <= pos_hi ? t0 + kKeys : -1, kv_len, s.k);
    const bool whole = t0 + kKeys - 1 <= pos_lo && t0 >= lo_hi;
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      if (whole) {
        Softmax<D, false>(sc[mt], r, mt, t0, a.scale * kLog2e, o[mt]);
      } else {
        Softmax<D, true>(sc[mt], r, mt, t0, a.scale * kLog2e, o[mt]);
      }
    }
    CpAsyncWait<1>();
    __syncthreads();  // V(t0) is in (K of the next tile may still be loading)
    AccumulatePv<Fmt, D>(s, sc, o);
  }
  CpAsyncWait<0>();  // nothing in flight at exit (the last K group is empty)
  StoreRows<Fmt, D>(a, q_begin, rows, row0, group, kv_head, r, o);
}

template <typename Fmt, int D>
int Launch(const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len, void* stream) {
  const int64_t group = a.q_heads / a.kv.kv_heads;
  const int64_t tiles = (max_q_len * group + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(tiles * a.kv_splits), static_cast<unsigned>(a.kv.kv_heads),
                  static_cast<unsigned>(a.batch));
  constexpr int kSmem = sizeof(MmaSmem<D>);
  if (kSmem > 48 * 1024) {  // above the default limit of dynamic shared memory: opt in
    const cudaError_t set = cudaFuncSetAttribute(
        PrefillMmaKernel<Fmt, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (set != cudaSuccess) return static_cast<int>(set);
  }
  PrefillMmaKernel<Fmt, D>
      <<<grid, kWarps * kWarpSize, kSmem, static_cast<cudaStream_t>(stream)>>>(a, q_indptr);
  return static_cast<int>(cudaGetLastError());
}

bool DeviceHasMma() {
  int device = 0;
  int major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major >= 8;
}

}  // namespace

int AttentionPrefillMma(bool bf16, const AttentionArgs& a, const int32_t* q_indptr,
                        int64_t max_q_len, void* stream) {
  // Hopper first (attention_prefill_wgmma_kernel.cu): it declines other devices and head sizes.
  const int wgmma = AttentionPrefillWgmma(bf16, a, q_indptr, max_q_len, stream);
  if (wgmma != kNoMmaKernel) return wgmma;
  const int64_t d = a.kv.head_dim;
  if ((d != 64 && d != 128) || !DeviceHasMma()) return kNoMmaKernel;
  if (d == 64) {
    return bf16 ? Launch<dev::Bf16, 64>(a, q_indptr, max_q_len, stream)
                : Launch<dev::Fp16, 64>(a, q_indptr, max_q_len, stream);
  }
  return bf16 ? Launch<dev::Bf16, 128>(a, q_indptr, max_q_len, stream)
              : Launch<dev::Fp16, 128>(a, q_indptr, max_q_len, stream);
}

#else  // no warp-level matrix multiply on this target: the SIMT kernel serves

int AttentionPrefillMma(bool, const AttentionArgs&, const int32_t*, int64_t, void*) {
  return kNoMmaKernel;
}

#endif

}  // namespace kvtier::ops::gpu_launch
