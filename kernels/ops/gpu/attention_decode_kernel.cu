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
// CombineKernel merges per (sequence, head). Both are launched as programmatic dependents (pdl.h).
#include <cstdint>
#include <type_traits>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"
#include "kernels/ops/gpu/pdl.h"

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
  float m[kWarps][G];  // teams are merged within their warp first
  float l[kWarps][G];
  float acc[kWarps][G][D];
};

// One block's work: keys [begin, end) of sequence b, KV head kv_head; split `split` of `splits`.
struct DecodeRange {
  int64_t b;
  int64_t kv_head;
  int64_t begin;
  int64_t end;
  int split;
  int splits;
};

// One lane's state: its dims of every group head's query (pre-scaled), running max, sum and
// output accumulator over the keys its team has seen.
template <int D, int G>
struct TeamState {
  static constexpr int kN = Team<D>::kPerLane;
  float q[G][kN];
  float m[G];
  float l[G];
  float acc[G][kN];
};

// A step's K and V rows for this lane's team, as raw 16-bit words (zeros past the range).
template <int D>
struct StepRows {
  uint4 k[kKeysPerStep][Team<D>::kPerLane / 8];
  uint4 v[kKeysPerStep][Team<D>::kPerLane / 8];
};

template <typename Fmt, int D, int G>
__device__ void InitTeam(const AttentionArgs& a, const DecodeRange& r, int group, int dim0,
                         TeamState<D, G>& st) {
  constexpr int kN = TeamState<D, G>::kN;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    st.m[g] = -INFINITY;
    st.l[g] = 0;
#pragma unroll
    for (int i = 0; i < kN; ++i) st.q[g][i] = st.acc[g][i] = 0;
    if (g < group) {
      const int64_t head = r.kv_head * group + g;
      LoadLane<Fmt, kN>(a.q + r.b * a.q_token_stride + head * D + dim0, st.q[g]);
#pragma unroll
      for (int i = 0; i < kN; ++i) st.q[g][i] *= a.scale * kLog2e;
    }
  }
}

// Issues every load of the step before any arithmetic: many bytes in flight.
template <int D>
__device__ __forceinline__ void LoadStep(const AttentionArgs& a, const int32_t* table,
                                         const DecodeRange& r, int64_t first_key, int64_t stride,
                                         int dim0, StepRows<D>& rows) {
  constexpr int kWords = Team<D>::kPerLane / 8;
#pragma unroll
  for (int u = 0; u < kKeysPerStep; ++u) {
    const int64_t t = first_key + u * stride;
#pragma unroll
    for (int c = 0; c < kWords; ++c) rows.k[u][c] = rows.v[u][c] = make_uint4(0, 0, 0, 0);
    if (t < r.end) {
      const auto* kp = reinterpret_cast<const uint4*>(KvRow(a, table, 0, t, r.kv_head) + dim0);
      const auto* vp = reinterpret_cast<const uint4*>(KvRow(a, table, 1, t, r.kv_head) + dim0);
#pragma unroll
      for (int c = 0; c < kWords; ++c) {
        rows.k[u][c] = kp[c];
        rows.v[u][c] = vp[c];
      }
    }
  }
}

// Scores of the step's keys for every group head (K converted once per key, dot products reduced
// within the team), the online softmax update (one rescale per step), then acc += P V.
template <typename Fmt, int D, int G>
__device__ __forceinline__ void ProcessStep(const StepRows<D>& rows, int64_t first_key,
                                            int64_t stride, int64_t end, TeamState<D, G>& st) {
  constexpr int kN = TeamState<D, G>::kN;
  float sc[G][kKeysPerStep];
#pragma unroll
  for (int u = 0; u < kKeysPerStep; ++u) {
    float kf[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) kf[i] = Elem<Fmt>(rows.k[u], i);
    const bool valid = first_key + u * stride < end;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float dot = 0;
#pragma unroll
      for (int i = 0; i < kN; ++i) dot += st.q[g][i] * kf[i];
#pragma unroll
      for (int x = Team<D>::kLanes / 2; x > 0; x /= 2) dot += __shfl_xor_sync(~0u, dot, x);
      sc[g][u] = valid ? dot : -INFINITY;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float step_max = -INFINITY;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) step_max = fmaxf(step_max, sc[g][u]);
    const float m_new = fmaxf(st.m[g], step_max);
    // m_new is -inf only while this team has had no key: nothing to scale or add.
    const float alpha = m_new == -INFINITY ? 1.0f : exp2f(st.m[g] - m_new);
    float p_sum = 0;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      sc[g][u] = sc[g][u] == -INFINITY ? 0.0f : exp2f(sc[g][u] - m_new);
      p_sum += sc[g][u];
    }
#pragma unroll
    for (int i = 0; i < kN; ++i) st.acc[g][i] *= alpha;
    st.m[g] = m_new;
    st.l[g] = st.l[g] * alpha + p_sum;
  }
#pragma unroll
  for (int u = 0; u < kKeysPerStep; ++u) {
    float vf[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) vf[i] = Elem<Fmt>(rows.v[u], i);
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int i = 0; i < kN; ++i) st.acc[g][i] += sc[g][u] * vf[i];
    }
  }
}

// Merges the teams of each warp by shuffles (lanes holding the same dims); team 0 leaves its warp's
// result in shared memory.
template <int D, int G>
__device__ void MergeTeams(TeamState<D, G>& st, int dim0, DecodeSmem<D, G>& s) {
  constexpr int kN = TeamState<D, G>::kN;
  const int warp = threadIdx.x / kWarpSize;
  const int team = threadIdx.x % kWarpSize / Team<D>::kLanes;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int x = Team<D>::kLanes; x < kWarpSize; x *= 2) {
      const float m_other = __shfl_xor_sync(~0u, st.m[g], x);
      const float l_other = __shfl_xor_sync(~0u, st.l[g], x);
      const float mx = fmaxf(st.m[g], m_other);
      const float f = mx == -INFINITY ? 0.0f : exp2f(st.m[g] - mx);
      const float f_other = mx == -INFINITY ? 0.0f : exp2f(m_other - mx);
      st.l[g] = st.l[g] * f + l_other * f_other;
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        st.acc[g][i] = st.acc[g][i] * f + __shfl_xor_sync(~0u, st.acc[g][i], x) * f_other;
      }
      st.m[g] = mx;
    }
    if (team == 0) {
      if (dim0 == 0) {
        s.m[warp][g] = st.m[g];
        s.l[warp][g] = st.l[g];
      }
#pragma unroll
      for (int i = 0; i < kN; ++i) s.acc[warp][g][dim0 + i] = st.acc[g][i];
    }
  }
}

// Merges the warps' results; the output itself with one split, else the split's normalized partial
// output and log2-sum-exp.
template <typename Fmt, int D, int G>
__device__ void WriteBlock(const AttentionArgs& a, const DecodeRange& r, int group,
                           const DecodeSmem<D, G>& s, float* partial_out, float* partial_lse) {
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
    const int64_t head = r.kv_head * group + g;
    if (r.splits == 1) {
      a.out[(r.b * a.q_heads + head) * D + d] = Fmt::FromFloat(out);
    } else {
      const int64_t at = (r.b * a.q_heads + head) * r.splits + r.split;
      partial_out[at * D + d] = out;
      if (d == 0) partial_lse[at] = sum > 0 ? mx + log2f(sum) : -INFINITY;
    }
  }
}

// At least kMinBlocks blocks per multiprocessor (half for the largest group, whose registers would
// spill): a memory-bound kernel needs many bytes in flight.
template <typename Fmt, int D, int G>
__global__ void __launch_bounds__(kWarps* kWarpSize, G >= 8 ? kMinBlocks / 2 : kMinBlocks)
    DecodeKernel(AttentionArgs a, int64_t chunk, float* partial_out, float* partial_lse) {
  using T = Team<D>;
  __shared__ DecodeSmem<D, G> s;
  pdl::AllowDependents();
  pdl::WaitForPrerequisites();
  DecodeRange r;
  r.split = blockIdx.x;
  r.splits = gridDim.x;
  r.kv_head = blockIdx.y;
  r.b = blockIdx.z;
  const int group = static_cast<int>(a.q_heads / a.kv.kv_heads);
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int team = lane / T::kLanes;
  const int dim0 = lane % T::kLanes * T::kPerLane;
  const int32_t* table = a.block_tables + r.b * a.max_blocks;
  const int64_t kv_len = a.kv_lens[r.b];
  const int64_t pos = kv_len - 1;
  const int64_t first =
      a.sliding_window > 0 && pos - a.sliding_window + 1 > 0 ? pos - a.sliding_window + 1 : 0;
  r.begin = first + r.split * chunk;
  r.end = r.begin + chunk < kv_len ? r.begin + chunk : kv_len;

  TeamState<D, G> st;
  InitTeam<Fmt, D, G>(a, r, group, dim0, st);
  // A step: this team's keys t0 + team + u * kStride, u < kKeysPerStep.
  constexpr int kStride = kWarps * T::kTeams;
  for (int64_t t0 = r.begin + warp * T::kTeams; t0 < r.end; t0 += kStride * kKeysPerStep) {
    StepRows<D> rows;
    LoadStep<D>(a, table, r, t0 + team, kStride, dim0, rows);
    ProcessStep<Fmt, D, G>(rows, t0 + team, kStride, r.end, st);
  }
  MergeTeams<D, G>(st, dim0, s);
  __syncthreads();
  WriteBlock<Fmt, D, G>(a, r, group, s, partial_out, partial_lse);
}

// One block per (row, head) (AttentionCombine, launch.h): the splits' outputs weighted by
// exp2(lse - max lse). Decode's rows are its sequences; prefill's its query tokens, the last
// *rows_end of the grid's rows being past the batch's.
template <typename Fmt>
__global__ void CombineKernel(int splits, int64_t head_dim, int64_t q_heads,
                              const int32_t* rows_end, const float* partial_out,
                              const float* partial_lse, uint16_t* out) {
  pdl::AllowDependents();
  pdl::WaitForPrerequisites();
  const int64_t at = blockIdx.x;  // row * q_heads + head
  if (rows_end != nullptr && at >= *rows_end * q_heads) return;
  const float* lse = partial_lse + at * splits;
  float mx = -INFINITY;
  for (int sp = 0; sp < splits; ++sp) mx = fmaxf(mx, lse[sp]);
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float sum = 0;
    float o = 0;
    if (mx != -INFINITY) {
      for (int sp = 0; sp < splits; ++sp) {
        if (lse[sp] == -INFINITY) continue;  // a split that saw no key wrote no output
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
  const int err = pdl::Launch(DecodeKernel<Fmt, D, G>, grid, kWarps * kWarpSize, 0, st, a, chunk,
                              partial_out, partial_lse);
  if (err != 0 || splits == 1) return err;
  return AttentionCombine(std::is_same_v<Fmt, dev::Bf16>, splits, a.batch, nullptr, a.q_heads, D,
                          partial_out, partial_lse, a.out, stream);
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

int AttentionCombine(bool bf16, int64_t splits, int64_t rows, const int32_t* rows_end,
                     int64_t q_heads, int64_t head_dim, const float* partial_out,
                     const float* partial_lse, uint16_t* out, void* stream) {
  if (rows <= 0) return 0;
  const auto st = static_cast<cudaStream_t>(stream);
  const auto grid = static_cast<unsigned>(rows * q_heads);
  const auto sp = static_cast<int>(splits);
  return bf16 ? pdl::Launch(CombineKernel<dev::Bf16>, grid, 128, 0, st, sp, head_dim, q_heads,
                            rows_end, partial_out, partial_lse, out)
              : pdl::Launch(CombineKernel<dev::Fp16>, grid, 128, 0, st, sp, head_dim, q_heads,
                            rows_end, partial_out, partial_lse, out);
}

int AttentionDecode(bool bf16, const AttentionArgs& a, int splits, int64_t chunk,
                    float* partial_out, float* partial_lse, void* stream) {
  if (a.batch <= 0) return 0;
  return bf16 ? LaunchFmt<dev::Bf16>(a, splits, chunk, partial_out, partial_lse, stream)
              : LaunchFmt<dev::Fp16>(a, splits, chunk, partial_out, partial_lse, stream);
}

}  // namespace kvtier::ops::gpu_launch
