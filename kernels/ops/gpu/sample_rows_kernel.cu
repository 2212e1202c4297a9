// Device side of SampleRows (kernels/ops/gpu/sample_rows.h): a thread block per row (in turn, when
// there are more rows than blocks), choosing as ArgmaxKernel (elementwise_kernel.cu) does for a
// greedy row and as SampleKernel (sampling_kernel.cu) does for a sampled one — the same
// arithmetic in the same order, so the same token bit for bit; that file explains the method (a
// radix search over each token's rank key, masses as 64-bit fixed point).
// The search's device functions are sampling_device.cuh's, shared with sampling_kernel.cu.
#include <cfloat>
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/sample_rows_launch.h"
#include "kernels/ops/gpu/sampling_device.cuh"

namespace kvtier::ops::gpu_launch {
namespace {

// SampleSmem (sampling_device.cuh) and the greedy reduction's slots, one per warp (warps of >= 32
// lanes).
struct SampleRowsSmem : SampleSmem {
  float best_v[kThreads / 32];
  int32_t best_i[kThreads / 32];
};

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
__device__ int32_t ArgmaxOne(const float* row, int64_t vocab, SampleRowsSmem& s) {
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
  __shared__ SampleRowsSmem s;
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
