// Device side of SampleRows (kernels/ops/gpu/sample_rows.h): a thread block per row (in turn, when
// there are more rows than blocks), choosing as ArgmaxKernel (elementwise_kernel.cu) does for a
// greedy row and as SampleKernel (sampling_kernel.cu) does for a sampled one — the same
// arithmetic in the same order, so the same token bit for bit; that file explains the method (a
// radix search over each token's rank key, masses as 64-bit fixed point).
//
// The device functions below are copies of sampling_kernel.cu's, which keeps them in an unnamed
// namespace of its own; a shared header for both is the lead's change to make (the per-row file is
// not this one's owner's).
#include <cfloat>
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/sample_rows_launch.h"

namespace kvtier::ops::gpu_launch {
namespace {

constexpr int kThreads = 1024;
constexpr int kBins = 256;
constexpr double kScale = 17592186044416.0;  // 2^44: masses <= 1 each, sums < 2^63 for 2^19 tokens

using Count = unsigned long long;  // the type of 64-bit atomicAdd in both runtimes

struct SampleSmem {
  Count hist[kBins];
  Count total;
  int digit;
  Count above;
  Count found;
  float best_v[kThreads / 32];  // the greedy reduction's, one per warp (warps of >= 32 lanes)
  int32_t best_i[kThreads / 32];
};

// Larger key = earlier rank: bigger logit (NaN as -inf, -0 as +0), then smaller id.
__device__ __forceinline__ uint64_t Key(const float* logits, int64_t i) {
  float f = logits[i];
  if (isnan(f)) f = -INFINITY;
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  const uint32_t ordered = (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}

__device__ __forceinline__ int32_t TokenOf(uint64_t key) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(key));
}

// ref::Uniform, bit for bit.
__device__ __forceinline__ float Uniform(uint64_t seed, uint64_t counter) {
  uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

struct Row {
  const float* logits;
  int64_t vocab;
  const Count* mass;  // nullptr: every token weighs 1 (a count)
};

// sampling_kernel.cu's Search: the largest key K among tokens with key >= lower such that
// W(>= K) >= need (strict: > need); *weight = W(>= K). Every thread calls it and gets the result.
__device__ uint64_t Search(const Row& row, uint64_t lower, Count need, bool strict, SampleSmem& s,
                           Count* weight) {
  uint64_t prefix = 0;
  Count above = 0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    const uint64_t mask = shift == 56 ? 0 : ~0ull << (shift + 8);
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) s.hist[b] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < row.vocab; i += blockDim.x) {
      const uint64_t key = Key(row.logits, i);
      if (key < lower || (key & mask) != prefix) continue;
      const Count w = row.mass != nullptr ? row.mass[i] : 1;
      if (w != 0) atomicAdd(&s.hist[(key >> shift) & 0xff], w);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      Count cum = above;
      int b = kBins - 1;
      for (; b > 0; --b) {
        const Count next = cum + s.hist[b];
        if (strict ? next > need : next >= need) break;
        cum = next;
      }
      s.digit = b;
      s.above = cum;
      s.found = cum + s.hist[b];
    }
    __syncthreads();
    prefix |= static_cast<uint64_t>(s.digit) << shift;
    above = s.above;
  }
  *weight = s.found;
  __syncthreads();  // s is reused by the next call
  return prefix;
}

__device__ uint64_t MaxKey(const Row& row, SampleSmem& s) {
  uint64_t best = 0;
  for (int64_t i = threadIdx.x; i < row.vocab; i += blockDim.x) {
    const uint64_t key = Key(row.logits, i);
    best = key > best ? key : best;
  }
  if (threadIdx.x == 0) s.found = 0;
  __syncthreads();
  atomicMax(&s.found, static_cast<Count>(best));
  __syncthreads();
  const uint64_t result = s.found;
  __syncthreads();
  return result;
}

// mass[i] = round(exp(logit_i / T - top / T) * 2^44); returns the sum over keys >= lower.
__device__ Count Masses(const Row& row, float temperature, float top, uint64_t lower, Count* mass,
                        SampleSmem& s) {
  const double t = temperature;
  const double top_t = static_cast<double>(top) / t;
  Count sum = 0;
  for (int64_t i = threadIdx.x; i < row.vocab; i += blockDim.x) {
    const float l = row.logits[i];
    const double p = isnan(l) ? 0.0 : exp(static_cast<double>(l) / t - top_t);
    mass[i] = static_cast<Count>(p * kScale + 0.5);
    if (Key(row.logits, i) >= lower) sum += mass[i];
  }
  if (threadIdx.x == 0) s.total = 0;
  __syncthreads();
  atomicAdd(&s.total, sum);
  __syncthreads();
  const Count result = s.total;
  __syncthreads();
  return result;
}

// SampleKernel's body for one row; every thread returns the token.
__device__ int32_t SampleOne(const float* logits, int64_t vocab, const SampleRowArgs& p,
                             Count* mass, SampleSmem& s) {
  const Row by_count{logits, vocab, nullptr};
  const Row by_mass{logits, vocab, mass};
  const uint64_t top_key = MaxKey(by_count, s);
  const float top = logits[TokenOf(top_key)];
  if (!(top > -INFINITY)) return TokenOf(top_key);  // every logit -inf or NaN: nothing to weigh
  Count ignored;
  uint64_t lower = 0;  // the kept tokens are those with key >= lower
  if (p.top_k > 0 && p.top_k < vocab) lower = Search(by_count, 0, p.top_k, false, s, &ignored);
  Count kept = Masses(by_count, p.temperature, top, lower, mass, s);
  __syncthreads();  // every mass is written before any is read
  if (p.top_p < 1.0f) {
    const double need = static_cast<double>(p.top_p) * static_cast<double>(kept);
    lower = Search(by_mass, lower, static_cast<Count>(ceil(need)), false, s, &kept);
  }
  const auto target =
      static_cast<Count>(static_cast<double>(Uniform(p.seed, p.step)) * static_cast<double>(kept));
  return TokenOf(Search(by_mass, lower, target, true, s, &ignored));
}

__device__ __forceinline__ void Better(float& v, int32_t& i, float ov, int32_t oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

// ArgmaxKernel's body for one row; the token is valid in thread 0.
__device__ int32_t ArgmaxOne(const float* row, int64_t vocab, SampleSmem& s) {
  float v = -FLT_MAX;
  int32_t idx = INT32_MAX;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x)
    Better(v, idx, row[i], static_cast<int32_t>(i));
#pragma unroll
  for (int m = dev::kWarpSize / 2; m > 0; m /= 2) {
    Better(v, idx, __shfl_xor_sync(~0u, v, m), __shfl_xor_sync(~0u, idx, m));
  }
  const int warp = threadIdx.x / dev::kWarpSize;
  if (threadIdx.x % dev::kWarpSize == 0) {
    s.best_v[warp] = v;
    s.best_i[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / dev::kWarpSize); ++w)
      Better(v, idx, s.best_v[w], s.best_i[w]);
  }
  __syncthreads();                    // best_* are reused by the next row
  return idx == INT32_MAX ? 0 : idx;  // all NaN: token 0, as a scan from 0 gives
}

__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* logits, int64_t vocab, const SampleRowArgs* rows, int64_t n,
                     Count* workspace, int32_t* out) {
  __shared__ SampleSmem s;
  Count* mass = workspace + static_cast<int64_t>(blockIdx.x) * vocab;
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const SampleRowArgs p = rows[r];
    const float* row = logits + static_cast<int64_t>(p.logit_row) * vocab;
    // Block-uniform branch: every thread reads the same p.
    const int32_t token =
        p.temperature <= 0.0f ? ArgmaxOne(row, vocab, s) : SampleOne(row, vocab, p, mass, s);
    if (threadIdx.x == 0) out[r] = token;
    __syncthreads();  // this row's masses are read before the next row's are written
  }
}

}  // namespace

int SampleRows(const float* logits, int64_t vocab, const SampleRowArgs* rows, int64_t n, int blocks,
               uint64_t* workspace, int32_t* out, void* stream) {
  SampleRowsKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, vocab, rows, n, reinterpret_cast<Count*>(workspace), out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier::ops::gpu_launch
