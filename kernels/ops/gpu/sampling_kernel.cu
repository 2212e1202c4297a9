// Device side of Sample (kernels/ops/gpu/ops_gpu.h): the token ref::Sample chooses, without
// sorting the vocabulary.
//
// ref::Sample ranks tokens by (logit descending, id ascending), keeps the first top_k, then the
// ranks up to the first whose cumulative probability reaches top_p, and walks the kept ranks until
// the cumulative mass exceeds U * kept mass. Every one of those steps is "the first rank where a
// running sum crosses a bound", and ranks are the order of a 64-bit key (the logit's order-
// preserving bits, then the inverted id), so each is found by a radix search over the key: eight
// passes of 8-bit digits, each a histogram (count or mass) of the tokens that share the digits
// found so far, scanned from the top digit down. One thread block of kThreads does it all.
//
// Masses are exp(logit / T - top / T) (double, as the reference) held as 64-bit fixed point with
// 2^-44 resolution, so sums are exact integers whatever order the atomics land in: the same token
// on every run. The reference sums doubles in rank order; the two can differ only when a bound
// falls within the fixed point's rounding (< 1e-8 relative) of a cumulative mass.
#include <cfloat>
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"
#include "kernels/ops/gpu/sampling_device.cuh"

namespace kvtier::ops::gpu_launch {
namespace {

__global__ void __launch_bounds__(kThreads)
    SampleKernel(const float* logits, int64_t vocab, float temperature, int32_t top_k, float top_p,
                 uint64_t seed, uint64_t step, Count* mass, int32_t* out) {
  __shared__ SampleSmem s;
  const Row by_count{logits, vocab, nullptr};
  const Row by_mass{logits, vocab, mass};
  const uint64_t top_key = MaxKey(by_count, s);
  const float top = logits[TokenOf(top_key)];
  if (!(top > -INFINITY)) {  // every logit -inf or NaN: nothing to weigh
    if (threadIdx.x == 0) *out = TokenOf(top_key);
    return;
  }
  Count ignored;
  uint64_t lower = 0;  // the kept tokens are those with key >= lower
  if (top_k > 0 && top_k < vocab) lower = Search(by_count, 0, top_k, false, s, &ignored);
  Count kept = Masses(by_count, temperature, top, lower, mass, s);
  __syncthreads();  // every mass is written before any is read
  if (top_p < 1.0f) {
    const double need = static_cast<double>(top_p) * static_cast<double>(kept);
    lower = Search(by_mass, lower, static_cast<Count>(ceil(need)), false, s, &kept);
  }
  const auto target =
      static_cast<Count>(static_cast<double>(Uniform(seed, step)) * static_cast<double>(kept));
  const uint64_t key = Search(by_mass, lower, target, true, s, &ignored);
  if (threadIdx.x == 0) *out = TokenOf(key);
}

}  // namespace

int Sample(const float* logits, int64_t vocab, float temperature, int32_t top_k, float top_p,
           uint64_t seed, uint64_t step, uint64_t* workspace, int32_t* out, void* stream) {
  SampleKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, vocab, temperature, top_k, top_p, seed, step, reinterpret_cast<Count*>(workspace),
      out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier::ops::gpu_launch
