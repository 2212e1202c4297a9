// Device side of RopeAndWriteKv (kernels/ops/gpu/ops_gpu.h): ApplyRope of q and k, then WriteKv of
// the rotated k and of v, in one launch — a decode step has one token, so the two launches it
// replaces cost more than their work (and it is launched as a programmatic dependent, pdl.h).
//
// One thread block per token, one thread per item: a run of W pairs (j, j + half) of one head —
// q rotated in place, K rotated into the pool — or W elements of V copied. Each item loads all it
// needs before it stores, so a token costs one round trip to memory, not one per head (the first
// version looped over the heads in each thread: a decode step's 40 heads were 40 dependent round
// trips; this one took the 8B shape's decode step from 6.5 to 6.1 ms on the H100, ~12 us a layer).
// W = 8 (16-byte accesses) where the head size, strides and pointers allow it, else 1.
#include <algorithm>
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"
#include "kernels/ops/gpu/pdl.h"

namespace kvtier::ops::gpu_launch {
namespace {

// W 16-bit elements at p, as floats (one access when W is 8).
template <typename Fmt, int W>
__device__ __forceinline__ void Load(const uint16_t* p, float (&out)[W]) {
  if constexpr (W == 1) {
    out[0] = Fmt::ToFloat(*p);
  } else {
    dev::LoadVec<Fmt, W>(p, out);
  }
}

template <typename Fmt, int W>
__device__ __forceinline__ void Store(uint16_t* p, const float (&in)[W]) {
  if constexpr (W == 1) {
    *p = Fmt::FromFloat(in[0]);
  } else {
    dev::StoreVec<Fmt, W>(p, in);
  }
}

// Pairs (j + e, j + e + half), e < W, of the head at `in`, rotated into `out` (may be `in`).
template <typename Fmt, int W>
__device__ __forceinline__ void Rotate(const uint16_t* in, uint16_t* out, int64_t j, int64_t half,
                                       float pos, const float* inv_freq) {
  float x0[W], x1[W], freq[W];
  Load<Fmt, W>(in + j, x0);
  Load<Fmt, W>(in + j + half, x1);
#pragma unroll
  for (int e = 0; e < W; ++e) freq[e] = inv_freq[j + e];
#pragma unroll
  for (int e = 0; e < W; ++e) {
    float s;
    float c;
    sincosf(pos * freq[e], &s, &c);  // the float32 angle transformers computes
    const float a = x0[e], b = x1[e];
    x0[e] = a * c - b * s;
    x1[e] = b * c + a * s;
  }
  Store<Fmt, W>(out + j, x0);
  Store<Fmt, W>(out + j + half, x1);
}

template <typename Fmt, int W>
__global__ void RopeWriteKvKernel(RopeWriteKvArgs a) {
  pdl::AllowDependents();
  pdl::WaitForPrerequisites();
  const KvGeometry& g = a.kv;
  const int64_t token = blockIdx.x;
  const int64_t half = g.head_dim / 2;
  const int64_t token_elems = g.kv_heads * g.head_dim;
  const int64_t slot = a.token_slots[token] / g.block_tokens;
  const int64_t row = a.token_slots[token] % g.block_tokens;
  const int64_t slot_elems = g.layers * 2 * g.block_tokens * token_elems;
  uint16_t* k_dst =
      a.pool + slot * slot_elems + ((a.layer * 2) * g.block_tokens + row) * token_elems;
  uint16_t* v_dst = k_dst + g.block_tokens * token_elems;
  uint16_t* q = a.q + token * a.q_token_stride;
  const uint16_t* k = a.k + token * a.kv_token_stride;
  const uint16_t* v = a.v + token * a.kv_token_stride;
  const float pos = static_cast<float>(a.positions[token]);
  const auto runs = static_cast<int>(half / W);  // runs of W pairs per head
  const int rotations = static_cast<int>(a.q_heads + g.kv_heads) * runs;
  const int items = rotations + static_cast<int>(token_elems / W);
  for (int i = threadIdx.x; i < items; i += blockDim.x) {
    if (i < rotations) {
      const int h = i / runs;
      const int64_t j = static_cast<int64_t>(i % runs) * W;
      if (h < a.q_heads) {
        uint16_t* head = q + h * g.head_dim;
        Rotate<Fmt, W>(head, head, j, half, pos, a.inv_freq);
      } else {
        const int64_t at = (h - a.q_heads) * g.head_dim;
        Rotate<Fmt, W>(k + at, k_dst + at, j, half, pos, a.inv_freq);
      }
    } else {
      const int64_t e = static_cast<int64_t>(i - rotations) * W;
      if constexpr (W == 8) {
        *reinterpret_cast<uint4*>(v_dst + e) = *reinterpret_cast<const uint4*>(v + e);
      } else {
        v_dst[e] = v[e];
      }
    }
  }
}

// Whether every access of the W = 8 kernel is a whole, aligned 16-byte one.
bool Vectorizable(const RopeWriteKvArgs& a) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.kv.head_dim % 16 == 0 && a.q_token_stride % 8 == 0 && a.kv_token_stride % 8 == 0 &&
         aligned(a.q) && aligned(a.k) && aligned(a.v) && aligned(a.pool);
}

template <typename Fmt, int W>
int LaunchW(const RopeWriteKvArgs& a, int64_t n, cudaStream_t stream) {
  const int64_t items =
      (a.q_heads + a.kv.kv_heads) * (a.kv.head_dim / 2 / W) + a.kv.kv_heads * a.kv.head_dim / W;
  const int64_t warps = (items + dev::kWarpSize - 1) / dev::kWarpSize;
  const int64_t threads = std::min<int64_t>(1024, warps * dev::kWarpSize);
  return pdl::Launch(RopeWriteKvKernel<Fmt, W>, static_cast<unsigned>(n),
                     static_cast<unsigned>(threads), 0, stream, a);
}

template <typename Fmt>
int LaunchFmt(const RopeWriteKvArgs& a, int64_t n, cudaStream_t stream) {
  return Vectorizable(a) ? LaunchW<Fmt, 8>(a, n, stream) : LaunchW<Fmt, 1>(a, n, stream);
}

}  // namespace

int RopeWriteKv(bool bf16, const RopeWriteKvArgs& a, int64_t n, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  return bf16 ? LaunchFmt<dev::Bf16>(a, n, st) : LaunchFmt<dev::Fp16>(a, n, st);
}

}  // namespace kvtier::ops::gpu_launch
