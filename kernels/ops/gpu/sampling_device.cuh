// The device functions of the sampler (kernels/ops/gpu/ops_gpu.h Sample and SampleRows): a radix
// search over each token's 64-bit rank key with masses as 64-bit fixed point (sampling_kernel.cu
// says how and why). Included by sampling_kernel.cu and sample_rows_kernel.cu, so the single-row
// and the per-row kernels run the same arithmetic in the same order: the same token bit for bit.
// Each includer gets its own copy (an unnamed namespace); SampleSmem is the shared memory they need
// (a kernel needing more derives from it).
#pragma once

#include <cfloat>
#include <cstdint>

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

// The largest key K among tokens with key >= lower such that W(>= K) >= need (strict: > need),
// W summing the tokens' weights over keys in [K, max] and >= lower; *weight = W(>= K). Every
// thread of the block calls it and gets the result.
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

}  // namespace
}  // namespace kvtier::ops::gpu_launch
