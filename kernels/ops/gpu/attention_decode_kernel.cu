// Device side of AttentionDecode (kernels/ops/gpu/attention_gpu.h): one query token per sequence
// against its paged K/V, split over the sequence (flash-decoding) so that a long context keeps
// every multiprocessor busy even at batch 1, then a combine.
//
// A thread block owns one (split, KV head, sequence): a contiguous range of `chunk` keys and every
// query head of the KV head's group (at most G, a template bound), so each K/V row is read from
// memory once. Lanes work in teams of D / 8, one team per key, each lane holding 8 consecutive
// elements of the head (one 16-byte load of K and of V); a warp thus reads kWarpSize / (D / 8)
// keys per load and kKeysPerLane loads per step, all issued before any arithmetic so that many
// bytes are in flight. Scores are reduced within the team; softmax is online per team, updated
// once per step (one rescale for the step's keys). The block then merges its teams and warps; with
// one split it writes the output, otherwise its normalized partial output and log2-sum-exp, which
// CombineKernel merges per (sequence, head).
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch {
namespace {

using dev::kWarpSize;

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;
constexpr int kKeysPerStep = 4;
constexpr int kMinBlocks = 4;
constexpr float kLog2e = 1.4426950408889634f;

// kN (a multiple of 8) consecutive elements of a K/V row for one lane, 16 bytes at a time.
template <typename Fmt, int kN>
__device__ __forceinline__ void LoadLane(const uint16_t* p, float* out) {
#pragma unroll
  for (int i = 0; i < kN; i += 8) dev::LoadVec<Fmt, 8>(p + i, out + i);
}

// Element i of 16-bit words held in uint4s.
template <typename Fmt>
__device__ __forceinline__ float Elem(const uint4* w, int i) {
  const uint32_t word = (&w[i / 8].x)[i % 8 / 2];
  return Fmt::ToFloat(static_cast<uint16_t>(i % 2 == 0 ? word & 0xffffu : word >> 16));
}

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

// Lanes per key and keys per warp load for head_dim D (8 elements per lane; small heads use fewer
// lanes per key and more keys per load).
template <int D>
struct Team {
  static constexpr int kLanes = D / 8 < kWarpSize ? D / 8 : kWarpSize;
  static constexpr int kTeams = kWarpSize / kLanes;  // keys per warp load
  static constexpr int kPerLane = D / kLanes;        // 8, or more when D / 8 > kWarpSize
};

template <int D, int G>
struct DecodeSmem {
  static constexpr int kParts = kWarps;  // teams are merged within their warp first
  float m[kParts][G];
  float l[kParts][G];
  float acc[kParts][G][D];
};

// At least kMinBlocks blocks per multiprocessor (half for the largest group, whose registers would
// spill): a memory-bound kernel needs many bytes in flight.
template <typename Fmt, int D, int G>
__global__ void __launch_bounds__(kWarps* kWarpSize, G >= 8 ? kMinBlocks / 2 : kMinBlocks)
    DecodeKernel(AttentionArgs a, int64_t chunk, float* partial_out, float* partial_lse) {
  using T = Team<D>;
  constexpr int kN = T::kPerLane;
  __shared__ DecodeSmem<D, G> s;
  const int split = blockIdx.x;
  const int splits = gridDim.x;
  const int64_t kv_head = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int group = static_cast<int>(a.q_heads / a.kv.kv_heads);
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int team = lane / T::kLanes;
  const int dim0 = lane % T::kLanes * kN;
  const int32_t* table = a.block_tables + b * a.max_blocks;
  const int64_t kv_len = a.kv_lens[b];
  const int64_t pos = kv_len - 1;
  const int64_t first =
      a.sliding_window > 0 && pos - a.sliding_window + 1 > 0 ? pos - a.sliding_window + 1 : 0;
  const int64_t begin = first + split * chunk;
  const int64_t end = begin + chunk < kv_len ? begin + chunk : kv_len;

  float q[G][kN];
  float m[G];
  float l[G];
  float acc[G][kN];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
#pragma unroll
    for (int i = 0; i < kN; ++i) q[g][i] = acc[g][i] = 0;
    if (g < group) {
      const int64_t head = kv_head * group + g;
      LoadLane<Fmt, kN>(a.q + b * a.q_token_stride + head * D + dim0, q[g]);
#pragma unroll
      for (int i = 0; i < kN; ++i) q[g][i] *= a.scale * kLog2e;
    }
  }

  // Step: this team's keys t0 + team + u * kWarps * kTeams, u < kKeysPerLane.
  constexpr int kStride = kWarps * T::kTeams;
  for (int64_t t0 = begin + warp * T::kTeams; t0 < end; t0 += kStride * kKeysPerStep) {
    // Raw 16-bit words (kN / 8 uint4 per row), converted where used: half the registers.
    uint4 kr[kKeysPerStep][kN / 8];
    uint4 vr[kKeysPerStep][kN / 8];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      const int64_t t = t0 + team + static_cast<int64_t>(u) * kStride;
#pragma unroll
      for (int c = 0; c < kN / 8; ++c) kr[u][c] = vr[u][c] = make_uint4(0, 0, 0, 0);
      if (t < end) {
        const uint4* kp = reinterpret_cast<const uint4*>(KvRow(a, table, 0, t, kv_head) + dim0);
        const uint4* vp = reinterpret_cast<const uint4*>(KvRow(a, table, 1, t, kv_head) + dim0);
#pragma unroll
        for (int c = 0; c < kN / 8; ++c) {
          kr[u][c] = kp[c];
          vr[u][c] = vp[c];
        }
      }
    }
    // Scores of the step's keys for every query head (K converted once per key).
    float sc[G][kKeysPerStep];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      float kf[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) kf[i] = Elem<Fmt>(kr[u], i);
      const bool valid = t0 + team + static_cast<int64_t>(u) * kStride < end;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float dot = 0;
#pragma unroll
        for (int i = 0; i < kN; ++i) dot += q[g][i] * kf[i];
#pragma unroll
        for (int x = T::kLanes / 2; x > 0; x /= 2) dot += __shfl_xor_sync(~0u, dot, x);
        sc[g][u] = valid ? dot : -INFINITY;
      }
    }
    // Online softmax, one rescale per step; sc becomes the probabilities.
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float step_max = -INFINITY;
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) step_max = fmaxf(step_max, sc[g][u]);
      const float m_new = fmaxf(m[g], step_max);
      // m_new is -inf only while this team has had no key: nothing to scale or add.
      const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m[g] - m_new);
      float p_sum = 0;
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) {
        sc[g][u] = sc[g][u] == -INFINITY ? 0.0f : exp2f(sc[g][u] - m_new);
        p_sum += sc[g][u];
      }
#pragma unroll
      for (int i = 0; i < kN; ++i) acc[g][i] *= alpha;
      m[g] = m_new;
      l[g] = l[g] * alpha + p_sum;
    }
    // Values (V converted once per key).
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      float vf[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) vf[i] = Elem<Fmt>(vr[u], i);
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int i = 0; i < kN; ++i) acc[g][i] += sc[g][u] * vf[i];
      }
    }
  }

  // Merge the teams of each warp by shuffles (lanes holding the same dims), then the warps through
  // shared memory.
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int x = T::kLanes; x < kWarpSize; x *= 2) {
      const float mo = __shfl_xor_sync(~0u, m[g], x);
      const float lo = __shfl_xor_sync(~0u, l[g], x);
      const float mx = fmaxf(m[g], mo);
      const float f = mx == -INFINITY ? 0.0f : exp2f(m[g] - mx);
      const float fo = mx == -INFINITY ? 0.0f : exp2f(mo - mx);
      l[g] = l[g] * f + lo * fo;
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        acc[g][i] = acc[g][i] * f + __shfl_xor_sync(~0u, acc[g][i], x) * fo;
      }
      m[g] = mx;
    }
    if (team == 0) {
      if (dim0 == 0) {
        s.m[warp][g] = m[g];
        s.l[warp][g] = l[g];
      }
#pragma unroll
      for (int i = 0; i < kN; ++i) s.acc[warp][g][dim0 + i] = acc[g][i];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * D; i += blockDim.x) {
    const int g = i / D;
    const int d = i % D;
    float mx = -INFINITY;
    for (int w = 0; w < DecodeSmem<D, G>::kParts; ++w) mx = fmaxf(mx, s.m[w][g]);
    float sum = 0;
    float o = 0;
    if (mx != -INFINITY) {
      for (int w = 0; w < DecodeSmem<D, G>::kParts; ++w) {
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

template <typename Fmt, int D, int G>
int Launch(const AttentionArgs& a, int splits, int64_t chunk, float* partial_out,
           float* partial_lse, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(a.kv.kv_heads),
                  static_cast<unsigned>(a.batch));
  DecodeKernel<Fmt, D, G><<<grid, kWarps * kWarpSize, 0, st>>>(a, chunk, partial_out, partial_lse);
  if (splits > 1) {
    const int err = static_cast<int>(cudaGetLastError());
    if (err != 0) return err;
    CombineKernel<Fmt><<<static_cast<unsigned>(a.batch * a.q_heads), 128, 0, st>>>(
        splits, D, partial_out, partial_lse, a.out);
  }
  return static_cast<int>(cudaGetLastError());
}

// The smallest group bound G >= the model's query heads per KV head.
template <typename Fmt, int D>
int LaunchGroup(const AttentionArgs& a, int splits, int64_t chunk, float* po, float* pl,
                void* stream) {
  const int64_t group = a.q_heads / a.kv.kv_heads;
  if (group <= 1) return Launch<Fmt, D, 1>(a, splits, chunk, po, pl, stream);
  if (group <= 2) return Launch<Fmt, D, 2>(a, splits, chunk, po, pl, stream);
  if (group <= 4) return Launch<Fmt, D, 4>(a, splits, chunk, po, pl, stream);
  return Launch<Fmt, D, kMaxGroup>(a, splits, chunk, po, pl, stream);
}

template <typename Fmt>
int LaunchFmt(const AttentionArgs& a, int splits, int64_t chunk, float* po, float* pl,
              void* stream) {
  switch (a.kv.head_dim) {
    case 16:
      return LaunchGroup<Fmt, 16>(a, splits, chunk, po, pl, stream);
    case 32:
      return LaunchGroup<Fmt, 32>(a, splits, chunk, po, pl, stream);
    case 64:
      return LaunchGroup<Fmt, 64>(a, splits, chunk, po, pl, stream);
    case 128:
      return LaunchGroup<Fmt, 128>(a, splits, chunk, po, pl, stream);
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
