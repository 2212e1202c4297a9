// Hopper variant of AttentionPrefill (attention_prefill_wgmma.h): FlashAttention-3's matrix
// multiplies — warpgroup-wide wgmma.mma_async, S = Q K^T with both operands in shared memory and
// O += P V with P in registers — without its producer warpgroup: every thread stages K/V by
// cp.async, because the pool's 16-token blocks are gathered through a block table (TMA would need
// a descriptor per block). head_dim 128 only; compiled for sm_90a alone (wgmma exists nowhere
// else), so the launcher runs it on compute capability 9.0 devices only. The semantics are the SIMT
// kernel's (attention_prefill_kernel.cu); the numerics the mma.sync kernel's (P rounded to the
// format before P V).
//
// A thread block (two warpgroups, 256 threads) owns 128 query rows of one sequence and one KV head,
// rows being (token, query head of the group) pairs in token-major order, 64 rows per warpgroup.
// K and V tiles of 128 keys go through two stages of shared memory: tile j + 1 loads while tile j
// is computed. All tiles use the 128-byte swizzle (attention_prefill_wgmma.cuh), Q stays in shared
// memory for the whole block. Shared memory: Q 32 KiB + 2 stages x (K + V) 128 KiB; one block per
// multiprocessor. Blocks of the longest causal rows are launched first.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/attention_prefill_wgmma.cuh"
#include "kernels/ops/gpu/attention_prefill_wgmma.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error \
    "attention_prefill_wgmma_kernel.cu is compiled for sm_90a only (kernels/ops/gpu/CMakeLists.txt)"
#endif

namespace kvtier::ops::gpu_launch {
namespace {

using dev::kWarpSize;
static_assert(kWarpSize == 32, "wgmma fragments are laid out over 32-lane warps");

constexpr int kD = 128;
constexpr int kThreads = 256;                  // two warpgroups
constexpr int kRows = 128;                     // query rows per block, 64 per warpgroup
constexpr int kKeys = 128;                     // keys per tile
constexpr int kChunks = kD / 8;                // 16-byte chunks per row
constexpr int kPassRows = kThreads / kChunks;  // rows one pass of the block's threads stages
constexpr uint32_t kTileBytes = kKeys * kD * 2;
constexpr uint32_t kQBytes = kRows * kD * 2;
constexpr int kStages = 2;
constexpr int kSmemBytes = kQBytes + kStages * 2 * kTileBytes + 1024;  // + room to align to 1 KiB
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kRows == kKeys,
              "Q and K tiles share one half stride (kk / 4 * 128 rows * 128 bytes)");

// Where this thread's K and V rows are: its 16-byte chunk of each row, in the pool's slots.
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

// Starts staging K and V of keys [t0, t0 + kKeys) (zeros past kv_len, so no stale row of shared
// memory, NaN or not, reaches P V).
__device__ __forceinline__ void IssueTile(const KvSource& s, int t0, uint32_t k_smem,
                                          uint32_t v_smem) {
  const int chunk = threadIdx.x % kChunks;
#pragma unroll
  for (int i = 0; i < kKeys / kPassRows; ++i) {
    const int r = threadIdx.x / kChunks + i * kPassRows;
    const bool valid = t0 + r < s.kv_len;
    const uint16_t* k = valid ? KeyRow(s, t0 + r) : s.base;
    const uint32_t at = wgmma::SwizzledOffset(kKeys, r, chunk);
    wgmma::CpAsync16(k_smem + at, k, valid);
    wgmma::CpAsync16(v_smem + at, k + s.v_offset, valid);
  }
}

// Starts staging the block's kRows query rows (zeros past the sequence).
__device__ __forceinline__ void IssueQ(const AttentionArgs& a, int64_t q_begin, int64_t rows,
                                       int64_t row0, int64_t group, int64_t kv_head,
                                       uint32_t q_smem) {
  const int chunk = threadIdx.x % kChunks;
#pragma unroll
  for (int i = 0; i < kRows / kPassRows; ++i) {
    const int r = threadIdx.x / kChunks + i * kPassRows;
    const int64_t row = row0 + r;
    const bool valid = row < rows;
    const uint16_t* src = a.q;
    if (valid) {
      const int64_t head = kv_head * group + row % group;
      src = a.q + (q_begin + row / group) * a.q_token_stride + head * kD + chunk * 8;
    }
    wgmma::CpAsync16(q_smem + wgmma::SwizzledOffset(kRows, r, chunk), src, valid);
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

// This thread's two query rows (lane / 4 and lane / 4 + 8 of its warp's 16): positions, first
// visible keys, running max (raw scores) and this lane's share of the sum.
struct Rows {
  int pos[2];
  int lo[2];
  float m[2];
  float l[2];
};

// Masks the tile of keys from t0 (kMask: some key is hidden from some row of the block), updates
// the rows' max and sum (4 lanes share a row), rescales O and turns the scores into probabilities
// in place. scale: softmax scale times log2(e), > 0.
template <bool kMask>
__device__ __forceinline__ void Softmax(float (&s)[64], float (&o)[64], Rows& r, int t0,
                                        float scale) {
  const int lane = threadIdx.x % kWarpSize;
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
  float alpha[2], bias[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(~0u, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(~0u, mx[h], 2));
    const float m_new = fmaxf(r.m[h], mx[h]);
    alpha[h] = m_new == -INFINITY ? 1.0f : wgmma::Exp2((r.m[h] - m_new) * scale);
    bias[h] = m_new == -INFINITY ? 0.0f : m_new * scale;
    r.m[h] = m_new;
    r.l[h] *= alpha[h];
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int h = i % 4 / 2;
    s[i] = wgmma::Exp2(fmaf(s[i], scale, -bias[h]));
    r.l[h] += s[i];
    o[i] *= alpha[h];
  }
}

// Normalizes and writes this thread's part of its rows (rows past the sequence are skipped).
template <typename Fmt>
__device__ __forceinline__ void StoreRows(const AttentionArgs& a, int64_t q_begin, int64_t rows,
                                          int64_t row0, int64_t group, int64_t kv_head,
                                          const Rows& r, const float (&o)[64]) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = r.l[h];
    l += __shfl_xor_sync(~0u, l, 1);
    l += __shfl_xor_sync(~0u, l, 2);
    const int64_t row = row0 + threadIdx.x / kWarpSize * 16 + lane / 4 + h * 8;
    if (row >= rows) continue;
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    const int64_t head = kv_head * group + row % group;
    uint16_t* out = a.out + ((q_begin + row / group) * a.q_heads + head) * kD + (lane % 4) * 2;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      *reinterpret_cast<uint32_t*>(out + n * 8) =
          Pack<Fmt>(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
    }
  }
}

template <typename Fmt>
__global__ void __launch_bounds__(kThreads, 1)
    PrefillWgmmaKernel(AttentionArgs a, const int32_t* q_indptr) {
  extern __shared__ uint4 smem[];
  const uint32_t q_smem = (wgmma::SmemAddr(smem) + 1023) & ~1023u;
  const uint32_t kv_smem = q_smem + kQBytes;  // stage i: K at + 2i tiles, V at + 2i + 1
  const int64_t b = blockIdx.z;
  const int64_t kv_head = blockIdx.y;
  const int64_t group = a.q_heads / a.kv.kv_heads;
  const int64_t q_begin = q_indptr[b];
  const int64_t q_len = q_indptr[b + 1] - q_begin;
  const int64_t rows = q_len * group;
  const int64_t row0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kRows;
  if (row0 >= rows) return;
  const int kv_len = a.kv_lens[b];
  const int64_t first_pos = kv_len - q_len;

  KvSource src;
  src.token_elems = a.kv.kv_heads * kD;
  src.block_tokens = static_cast<int>(a.kv.block_tokens);
  src.slot_elems = a.kv.layers * 2 * a.kv.block_tokens * src.token_elems;
  src.v_offset = a.kv.block_tokens * src.token_elems;
  src.base = a.pool + a.layer * 2 * src.v_offset + kv_head * kD + threadIdx.x % kChunks * 8;
  src.table = a.block_tables + b * a.max_blocks;
  src.shift = (src.block_tokens & (src.block_tokens - 1)) == 0 ? __ffs(src.block_tokens) - 1 : -1;
  src.kv_len = kv_len;

  Rows r;
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = row0 + threadIdx.x / kWarpSize * 16 + lane / 4 + h * 8;
    r.pos[h] = row < rows ? static_cast<int>(first_pos + row / group) : -1;
    r.lo[h] = a.sliding_window > 0 ? r.pos[h] - static_cast<int>(a.sliding_window) + 1 : 0;
    r.m[h] = -INFINITY;
    r.l[h] = 0;
  }
  // Keys the block's rows see: from its first row's window start to its last row's position; a
  // tile needs no mask when every row sees all its keys (rows past the sequence are never stored).
  const int64_t last_row = (row0 + kRows < rows ? row0 + kRows : rows) - 1;
  const int pos_hi = static_cast<int>(first_pos + last_row / group);
  const int pos_lo = static_cast<int>(first_pos + row0 / group);
  int key_lo = a.sliding_window > 0 ? pos_lo - static_cast<int>(a.sliding_window) + 1 : 0;
  key_lo = key_lo > 0 ? key_lo / kKeys * kKeys : 0;
  const int lo_hi = a.sliding_window > 0 ? pos_hi - static_cast<int>(a.sliding_window) + 1 : 0;

  IssueQ(a, q_begin, rows, row0, group, kv_head, q_smem);
  IssueTile(src, key_lo, kv_smem, kv_smem + kTileBytes);
  wgmma::CpAsyncCommit();

  const float scale = a.scale * kLog2e;
  const uint32_t q_wg = q_smem + threadIdx.x / 128 * 64 * 128;  // this warpgroup's 64 rows
  float o[64];
  float s[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = s[i] = 0;
  int stage = 0;
  for (int t0 = key_lo; t0 <= pos_hi; t0 += kKeys) {
    wgmma::CpAsyncWait<0>();
    wgmma::FenceProxyAsync();
    __syncthreads();  // tile t0 is in; every warp is done with the other stage
    const uint32_t k_smem = kv_smem + stage * 2 * kTileBytes;
    const uint32_t v_smem = k_smem + kTileBytes;
    if (t0 + kKeys <= pos_hi) {
      const uint32_t next = kv_smem + (stage ^ 1) * 2 * kTileBytes;
      IssueTile(src, t0 + kKeys, next, next + kTileBytes);
    }
    wgmma::CpAsyncCommit();

    wgmma::PinRegisters(s);
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t at = kk / 4 * 128 * 128 + kk % 4 * 32;  // half of the row, 16 columns in it
      wgmma::MmaSs<Fmt>(s, wgmma::Descriptor(q_wg + at, 16, 1024),
                        wgmma::Descriptor(k_smem + at, 16, 1024), kk > 0);
    }
    wgmma::Commit();
    wgmma::Wait<0>();
    wgmma::PinRegisters(s);

    if (t0 + kKeys - 1 <= pos_lo && t0 >= lo_hi) {
      Softmax<false>(s, o, r, t0, scale);
    } else {
      Softmax<true>(s, o, r, t0, scale);
    }
    uint32_t p[kKeys / 16][4];  // P as A fragments: the m16n8 accumulator layout is m16k16's A
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      p[kk][0] = Pack<Fmt>(s[8 * kk + 0], s[8 * kk + 1]);
      p[kk][1] = Pack<Fmt>(s[8 * kk + 2], s[8 * kk + 3]);
      p[kk][2] = Pack<Fmt>(s[8 * kk + 4], s[8 * kk + 5]);
      p[kk][3] = Pack<Fmt>(s[8 * kk + 6], s[8 * kk + 7]);
    }
    wgmma::PinRegisters(o);
    wgmma::Fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      wgmma::MmaRs<Fmt>(o, p[kk], wgmma::Descriptor(v_smem + kk * 16 * 128, kKeys * 128, 1024));
    }
    wgmma::Commit();
    wgmma::Wait<0>();
    wgmma::PinRegisters(o);
    stage ^= 1;
  }
  wgmma::CpAsyncWait<0>();  // nothing in flight at exit
  StoreRows<Fmt>(a, q_begin, rows, row0, group, kv_head, r, o);
}

template <typename Fmt>
int Launch(const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len, void* stream) {
  const int64_t group = a.q_heads / a.kv.kv_heads;
  const int64_t tiles = (max_q_len * group + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(a.kv.kv_heads),
                  static_cast<unsigned>(a.batch));
  const cudaError_t set = cudaFuncSetAttribute(
      PrefillWgmmaKernel<Fmt>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (set != cudaSuccess) return static_cast<int>(set);
  PrefillWgmmaKernel<Fmt>
      <<<grid, kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(a, q_indptr);
  return static_cast<int>(cudaGetLastError());
}

bool DeviceIsSm90() {
  int device = 0;
  int major = 0;
  int minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
}

}  // namespace

int AttentionPrefillWgmma(bool bf16, const AttentionArgs& a, const int32_t* q_indptr,
                          int64_t max_q_len, void* stream) {
  if (a.kv.head_dim != kD || !(a.scale > 0)) return kNoMmaKernel;
  const char* pick = std::getenv("KVTIER_PREFILL_KERNEL");
  if (pick != nullptr && std::strcmp(pick, "mma") == 0) return kNoMmaKernel;
  if (!DeviceIsSm90()) return kNoMmaKernel;
  return bf16 ? Launch<dev::Bf16>(a, q_indptr, max_q_len, stream)
              : Launch<dev::Fp16>(a, q_indptr, max_q_len, stream);
}

}  // namespace kvtier::ops::gpu_launch
