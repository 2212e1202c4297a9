// Device side of AttentionDecode (kernels/ops/gpu/attention_gpu.h): one query token per sequence
// against its paged K/V, split over the sequence (flash-decoding) so that a long context keeps
// every multiprocessor busy even at batch 1, then a combine.
//
// A thread block owns one (split, KV head, sequence): a contiguous range of `chunk` keys and every
// query head of the KV head's group (at most kMaxGroup), so each K/V row is read from memory once.
// Its warps take keys round-robin, kKeysPerStep at a time (independent loads in flight); lanes
// split the head dimension (kWarpSize lanes, D / kWarpSize elements each), the dot products are
// reduced across the warp, and each warp keeps an online softmax per query head. The block then
// merges its warps; with one split it writes the output, otherwise its normalized partial output
// and log2-sum-exp, which CombineKernel merges per (sequence, head).
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch {
namespace {

using dev::kWarpSize;

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;
constexpr int kKeysPerStep = 4;
constexpr float kLog2e = 1.4426950408889634f;

// kN consecutive elements of a K/V row for one lane.
template <typename Fmt, int kN>
__device__ __forceinline__ void LoadLane(const uint16_t* p, float* out) {
  if constexpr (kN == 1) {
    out[0] = Fmt::ToFloat(*p);
  } else {
    dev::LoadVec<Fmt, kN>(p, out);
  }
}

__device__ __forceinline__ const uint16_t* KvRow(const AttentionArgs& a, const int32_t* table,
                                                 int kv, int64_t t, int64_t kv_head) {
  const KvGeometry& g = a.kv;
  const int64_t token_elems = g.kv_heads * g.head_dim;
  const int64_t slot = table[t / g.block_tokens];
  const int64_t slot_elems = g.layers * 2 * g.block_tokens * token_elems;
  return a.pool + slot * slot_elems +
         ((a.layer * 2 + kv) * g.block_tokens + t % g.block_tokens) * token_elems +
         kv_head * g.head_dim;
}

template <int D>
struct DecodeSmem {
  float m[kWarps][kMaxGroup];
  float l[kWarps][kMaxGroup];
  float acc[kWarps][kMaxGroup][D];
};

template <typename Fmt, int D>
__global__ void __launch_bounds__(kWarps* kWarpSize)
    DecodeKernel(AttentionArgs a, int64_t chunk, float* partial_out, float* partial_lse) {
  constexpr int kPerLane = D >= kWarpSize ? D / kWarpSize : 1;
  __shared__ DecodeSmem<D> s;
  const int split = blockIdx.x;
  const int splits = gridDim.x;
  const int64_t kv_head = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int group = static_cast<int>(a.q_heads / a.kv.kv_heads);
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int dim0 = lane * kPerLane;
  const bool active = dim0 < D;  // lanes past the head (D < kWarpSize) only join reductions
  const int32_t* table = a.block_tables + b * a.max_blocks;
  const int64_t kv_len = a.kv_lens[b];
  const int64_t pos = kv_len - 1;
  const int64_t first = a.sliding_window > 0 && pos - a.sliding_window + 1 > 0
                            ? pos - a.sliding_window + 1
                            : 0;
  const int64_t begin = first + split * chunk;
  const int64_t end = begin + chunk < kv_len ? begin + chunk : kv_len;

  float q[kMaxGroup][kPerLane];
  float m[kMaxGroup];
  float l[kMaxGroup];
  float acc[kMaxGroup][kPerLane];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) q[g][i] = acc[g][i] = 0;
    if (g < group && active) {
      const int64_t head = kv_head * group + g;
      LoadLane<Fmt, kPerLane>(a.q + b * a.q_token_stride + head * D + dim0, q[g]);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) q[g][i] *= a.scale * kLog2e;
    }
  }

  for (int64_t t0 = begin + warp * kKeysPerStep; t0 < end; t0 += kWarps * kKeysPerStep) {
    float k[kKeysPerStep][kPerLane];
    float v[kKeysPerStep][kPerLane];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) k[u][i] = v[u][i] = 0;
      if (t0 + u < end && active) {
        LoadLane<Fmt, kPerLane>(KvRow(a, table, 0, t0 + u, kv_head) + dim0, k[u]);
        LoadLane<Fmt, kPerLane>(KvRow(a, table, 1, t0 + u, kv_head) + dim0, v[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (t0 + u < end && g < group) {  // warp-uniform
          float dot = 0;
#pragma unroll
          for (int i = 0; i < kPerLane; ++i) dot += q[g][i] * k[u][i];
          const float sc = dev::WarpSum(dot);
          const float m_new = fmaxf(m[g], sc);
          const float alpha = exp2f(m[g] - m_new);
          const float p = exp2f(sc - m_new);
          m[g] = m_new;
          l[g] = l[g] * alpha + p;
#pragma unroll
          for (int i = 0; i < kPerLane; ++i) acc[g][i] = acc[g][i] * alpha + p * v[u][i];
        }
      }
    }
  }

  // Merge the warps.
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g < group && lane == 0) {
      s.m[warp][g] = m[g];
      s.l[warp][g] = l[g];
    }
    if (g < group && active) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) s.acc[warp][g][dim0 + i] = acc[g][i];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * D; i += blockDim.x) {
    const int g = i / D;
    const int d = i % D;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s.m[w][g]);
    float sum = 0;
    float o = 0;
    if (mx != -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float f = exp2f(s.m[w][g] - mx);
        sum += s.l[w][g] * f;
        o += s.acc[w][g][d] * f;
      }
    }
    const float out = sum > 0 ? o / sum : 0.0f;
    const int64_t head = kv_head * group + g;
    if (splits == 1) {
      a.out[(b * a.q_heads + head) * D + d] = Fmt::FromFloat(out);
    } else {
      const int64_t at = (b * a.q_heads + head) * splits + split;
      partial_out[at * D + d] = out;
      if (d == 0) partial_lse[at] = sum > 0 ? mx + log2f(sum) : -INFINITY;
    }
  }
}

// One block per (sequence, head): the splits' outputs weighted by exp2(lse - max lse).
template <typename Fmt>
__global__ void CombineKernel(int splits, int64_t head_dim, const float* partial_out,
                              const float* partial_lse, uint16_t* out) {
  const int64_t at = blockIdx.x;  // b * q_heads + head
  const float* lse = partial_lse + at * splits;
  float mx = -INFINITY;
  for (int sp = 0; sp < splits; ++sp) mx = fmaxf(mx, lse[sp]);
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float sum = 0;
    float o = 0;
    if (mx != -INFINITY) {
      for (int sp = 0; sp < splits; ++sp) {
        const float f = exp2f(lse[sp] - mx);
        sum += f;
        o += f * partial_out[(at * splits + sp) * head_dim + d];
      }
    }
    out[at * head_dim + d] = Fmt::FromFloat(sum > 0 ? o / sum : 0.0f);
  }
}

template <typename Fmt, int D>
int Launch(const AttentionArgs& a, int splits, int64_t chunk, float* partial_out,
           float* partial_lse, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(a.kv.kv_heads),
                  static_cast<unsigned>(a.batch));
  DecodeKernel<Fmt, D><<<grid, kWarps * kWarpSize, 0, st>>>(a, chunk, partial_out, partial_lse);
  if (splits > 1) {
    const int err = static_cast<int>(cudaGetLastError());
    if (err != 0) return err;
    CombineKernel<Fmt><<<static_cast<unsigned>(a.batch * a.q_heads), 128, 0, st>>>(
        splits, D, partial_out, partial_lse, a.out);
  }
  return static_cast<int>(cudaGetLastError());
}

template <typename Fmt>
int LaunchFmt(const AttentionArgs& a, int splits, int64_t chunk, float* po, float* pl,
              void* stream) {
  switch (a.kv.head_dim) {
    case 16:
      return Launch<Fmt, 16>(a, splits, chunk, po, pl, stream);
    case 32:
      return Launch<Fmt, 32>(a, splits, chunk, po, pl, stream);
    case 64:
      return Launch<Fmt, 64>(a, splits, chunk, po, pl, stream);
    case 128:
      return Launch<Fmt, 128>(a, splits, chunk, po, pl, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);  // the wrapper admits only the cases above
  }
}

}  // namespace

int AttentionDecode(bool bf16, const AttentionArgs& a, int splits, int64_t chunk,
                    float* partial_out, float* partial_lse, void* stream) {
  if (a.batch <= 0) return 0;
  return bf16 ? LaunchFmt<dev::Bf16>(a, splits, chunk, partial_out, partial_lse, stream)
              : LaunchFmt<dev::Fp16>(a, splits, chunk, partial_out, partial_lse, stream);
}

}  // namespace kvtier::ops::gpu_launch
