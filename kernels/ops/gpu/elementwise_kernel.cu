// Device side of the row-wise operators of kernels/ops/gpu/ops_gpu.h: embedding, RMSNorm (plain and
// fused with the residual add), RoPE, SiLU-and-mul, the KV pool write and argmax. One thread block
// per row (token); 16-bit elements move 8 at a time (16-byte accesses), arithmetic is float32.
//
// RMSNorm and SiLU-and-mul are launched as programmatic dependents (pdl.h): a decode step runs
// them between its projections.
//
// Rounding follows transformers' bf16/fp16 modules where they round between steps: the residual
// sum is rounded before it is normalized, and RMSNorm rounds x / rms before the weight multiplies
// it (LlamaRMSNorm's `weight * hidden_states.to(input_dtype)`).
#include <cfloat>
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"
#include "kernels/ops/gpu/pdl.h"

namespace kvtier::ops::gpu_launch {
namespace {

using dev::Bf16;
using dev::Fp16;
using dev::LoadVec;
using dev::StoreVec;

constexpr int kVec = 8;  // 16-bit elements per 16-byte access

cudaStream_t AsStream(void* s) { return static_cast<cudaStream_t>(s); }

unsigned Grid(int64_t rows) { return static_cast<unsigned>(rows); }

__global__ void EmbeddingKernel(const int32_t* ids, const uint16_t* table, int64_t hidden,
                                uint16_t* out) {
  const int64_t row = blockIdx.x;
  const uint4* src =
      reinterpret_cast<const uint4*>(table + static_cast<int64_t>(ids[row]) * hidden);
  uint4* dst = reinterpret_cast<uint4*>(out + row * hidden);
  for (int64_t i = threadIdx.x; i < hidden / kVec; i += blockDim.x) dst[i] = src[i];
}

template <typename Fmt>
__global__ void RmsNormKernel(const uint16_t* x, uint16_t* residual, const uint16_t* weight,
                              int64_t dim, float eps, uint16_t* out) {
  __shared__ float scratch[1024 / dev::kWarpSize];
  pdl::AllowDependents();
  pdl::WaitForPrerequisites();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  // Pass 1: the (rounded) sum into residual when fusing; the sum of squares of what is normalized.
  float squares = 0;
  for (int64_t i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    float v[kVec];
    LoadVec<Fmt, kVec>(x + base + i, v);
    if (residual != nullptr) {
      float r[kVec];
      LoadVec<Fmt, kVec>(residual + base + i, r);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = Fmt::ToFloat(Fmt::FromFloat(r[j] + v[j]));
      StoreVec<Fmt, kVec>(residual + base + i, v);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) squares += v[j] * v[j];
  }
  const float inv_rms = rsqrtf(dev::BlockSum(squares, scratch) / static_cast<float>(dim) + eps);
  // Pass 2: each thread rereads exactly the elements it wrote, so no barrier is needed for them.
  const uint16_t* src = residual != nullptr ? residual : x;
  for (int64_t i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    float v[kVec];
    float w[kVec];
    LoadVec<Fmt, kVec>(src + base + i, v);
    LoadVec<Fmt, kVec>(weight + i, w);
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = w[j] * Fmt::ToFloat(Fmt::FromFloat(v[j] * inv_rms));
    StoreVec<Fmt, kVec>(out + base + i, v);
  }
}

// One block per token; thread t rotates pairs (j, j + half) of every head for j = t, t + blockDim.
template <typename Fmt>
__global__ void RopeKernel(uint16_t* x, int64_t token_stride, const int32_t* positions,
                           const float* inv_freq, int64_t heads, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  uint16_t* row = x + static_cast<int64_t>(blockIdx.x) * token_stride;
  const float pos = static_cast<float>(positions[blockIdx.x]);
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
    float s;
    float c;
    sincosf(pos * inv_freq[j], &s, &c);  // the float32 angle transformers computes
    for (int64_t h = 0; h < heads; ++h) {
      uint16_t* p = row + h * head_dim;
      const float x0 = Fmt::ToFloat(p[j]);
      const float x1 = Fmt::ToFloat(p[j + half]);
      p[j] = Fmt::FromFloat(x0 * c - x1 * s);
      p[j + half] = Fmt::FromFloat(x1 * c + x0 * s);
    }
  }
}

template <typename Fmt>
__global__ void SiluAndMulKernel(const uint16_t* gate_up, int64_t d, uint16_t* out) {
  pdl::AllowDependents();
  pdl::WaitForPrerequisites();
  const uint16_t* gate = gate_up + static_cast<int64_t>(blockIdx.x) * 2 * d;
  uint16_t* o = out + static_cast<int64_t>(blockIdx.x) * d;
  for (int64_t i = threadIdx.x * kVec; i < d; i += blockDim.x * kVec) {
    float g[kVec];
    float u[kVec];
    LoadVec<Fmt, kVec>(gate + i, g);
    LoadVec<Fmt, kVec>(gate + d + i, u);
#pragma unroll
    for (int j = 0; j < kVec; ++j) g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
    StoreVec<Fmt, kVec>(o + i, g);
  }
}

__global__ void WriteKvKernel(const uint16_t* k, const uint16_t* v, int64_t src_token_stride,
                              const int64_t* token_slots, KvGeometry g, int64_t layer,
                              uint16_t* pool) {
  const int64_t token_elems = g.kv_heads * g.head_dim;
  const int64_t slot = token_slots[blockIdx.x] / g.block_tokens;
  const int64_t row = token_slots[blockIdx.x] % g.block_tokens;
  const int64_t slot_elems = g.layers * 2 * g.block_tokens * token_elems;
  const int64_t k_at = slot * slot_elems + ((layer * 2) * g.block_tokens + row) * token_elems;
  const int64_t v_at = k_at + g.block_tokens * token_elems;
  const int64_t src_at = static_cast<int64_t>(blockIdx.x) * src_token_stride;
  for (int64_t i = threadIdx.x; i < token_elems / kVec; i += blockDim.x) {
    reinterpret_cast<uint4*>(pool + k_at)[i] = reinterpret_cast<const uint4*>(k + src_at)[i];
    reinterpret_cast<uint4*>(pool + v_at)[i] = reinterpret_cast<const uint4*>(v + src_at)[i];
  }
}

template <typename Fmt>
__global__ void AddBiasKernel(float* y, const uint16_t* bias, int64_t n) {
  float* row = y + static_cast<int64_t>(blockIdx.x) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] += Fmt::ToFloat(bias[i]);
}

// The better of two (value, index) candidates: larger value, then lower index (torch.argmax).
__device__ __forceinline__ void Better(float& v, int32_t& i, float ov, int32_t oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__global__ void ArgmaxKernel(const float* logits, int64_t vocab, int32_t* out) {
  __shared__ float best_v[1024 / dev::kWarpSize];
  __shared__ int32_t best_i[1024 / dev::kWarpSize];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
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
    best_v[warp] = v;
    best_i[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / dev::kWarpSize); ++w)
      Better(v, idx, best_v[w], best_i[w]);
    out[blockIdx.x] = idx == INT32_MAX ? 0 : idx;  // all NaN: token 0, as a scan from 0 gives
  }
}

// Threads for a row of `elems` elements handled `per_thread` at a time: a multiple of 64 (whole
// warps on every vendor), at most 1024.
unsigned RowThreads(int64_t elems, int64_t per_thread) {
  int64_t t = (elems / per_thread + 63) / 64 * 64;
  if (t < 64) t = 64;
  return static_cast<unsigned>(t > 1024 ? 1024 : t);
}

}  // namespace

int Embedding(bool bf16, const int32_t* ids, int64_t n, const uint16_t* table, int64_t hidden,
              uint16_t* out, void* stream) {
  (void)bf16;  // a copy: the format does not matter
  EmbeddingKernel<<<Grid(n), RowThreads(hidden, kVec), 0, AsStream(stream)>>>(ids, table, hidden,
                                                                              out);
  return static_cast<int>(cudaGetLastError());
}

int RmsNorm(bool bf16, const uint16_t* x, uint16_t* residual, const uint16_t* weight, int64_t rows,
            int64_t dim, float eps, uint16_t* out, void* stream) {
  const unsigned threads = RowThreads(dim, kVec);
  return bf16 ? pdl::Launch(RmsNormKernel<Bf16>, Grid(rows), threads, 0, AsStream(stream), x,
                            residual, weight, dim, eps, out)
              : pdl::Launch(RmsNormKernel<Fp16>, Grid(rows), threads, 0, AsStream(stream), x,
                            residual, weight, dim, eps, out);
}

int Rope(bool bf16, uint16_t* x, int64_t token_stride, const int32_t* positions,
         const float* inv_freq, int64_t n, int64_t heads, int64_t head_dim, void* stream) {
  const unsigned threads = RowThreads(head_dim / 2, 1);
  if (bf16) {
    RopeKernel<Bf16><<<Grid(n), threads, 0, AsStream(stream)>>>(x, token_stride, positions,
                                                                inv_freq, heads, head_dim);
  } else {
    RopeKernel<Fp16><<<Grid(n), threads, 0, AsStream(stream)>>>(x, token_stride, positions,
                                                                inv_freq, heads, head_dim);
  }
  return static_cast<int>(cudaGetLastError());
}

int SiluAndMul(bool bf16, const uint16_t* gate_up, int64_t n, int64_t d, uint16_t* out,
               void* stream) {
  const unsigned threads = RowThreads(d, kVec);
  return bf16 ? pdl::Launch(SiluAndMulKernel<Bf16>, Grid(n), threads, 0, AsStream(stream), gate_up,
                            d, out)
              : pdl::Launch(SiluAndMulKernel<Fp16>, Grid(n), threads, 0, AsStream(stream), gate_up,
                            d, out);
}

int WriteKv(const uint16_t* k, const uint16_t* v, int64_t src_token_stride,
            const int64_t* token_slots, int64_t n, const KvGeometry& g, int64_t layer,
            uint16_t* pool, void* stream) {
  const unsigned threads = RowThreads(g.kv_heads * g.head_dim, kVec);
  WriteKvKernel<<<Grid(n), threads, 0, AsStream(stream)>>>(k, v, src_token_stride, token_slots, g,
                                                           layer, pool);
  return static_cast<int>(cudaGetLastError());
}

int AddBiasToFloat(bool bf16, float* y, const uint16_t* bias, int64_t m, int64_t n, void* stream) {
  const unsigned threads = RowThreads(n, 4);
  if (bf16) {
    AddBiasKernel<Bf16><<<Grid(m), threads, 0, AsStream(stream)>>>(y, bias, n);
  } else {
    AddBiasKernel<Fp16><<<Grid(m), threads, 0, AsStream(stream)>>>(y, bias, n);
  }
  return static_cast<int>(cudaGetLastError());
}

int Argmax(const float* logits, int64_t rows, int64_t vocab, int32_t* out, void* stream) {
  ArgmaxKernel<<<Grid(rows), 1024, 0, AsStream(stream)>>>(logits, vocab, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier::ops::gpu_launch
