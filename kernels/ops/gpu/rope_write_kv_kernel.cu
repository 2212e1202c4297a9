// Device side of RopeAndWriteKv (kernels/ops/gpu/ops_gpu.h): ApplyRope of q and k, then WriteKv of
// the rotated k and of v, in one launch — a decode step has one token, so the two launches it
// replaces cost more than their work. One thread block per token; the thread that rotates a pair
// of a K head stores that pair into the pool itself, so no barrier is needed.
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch {
namespace {

template <typename Fmt>
__device__ __forceinline__ void Rotate(const uint16_t* in, uint16_t* out, int64_t j, int64_t half,
                                       float c, float s) {
  const float x0 = Fmt::ToFloat(in[j]);
  const float x1 = Fmt::ToFloat(in[j + half]);
  out[j] = Fmt::FromFloat(x0 * c - x1 * s);
  out[j + half] = Fmt::FromFloat(x1 * c + x0 * s);
}

template <typename Fmt>
__global__ void RopeWriteKvKernel(RopeWriteKvArgs a) {
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
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
    float s;
    float c;
    sincosf(pos * a.inv_freq[j], &s, &c);  // the float32 angle transformers computes
    for (int64_t h = 0; h < a.q_heads; ++h)
      Rotate<Fmt>(q + h * g.head_dim, q + h * g.head_dim, j, half, c, s);
    for (int64_t h = 0; h < g.kv_heads; ++h) {
      Rotate<Fmt>(k + h * g.head_dim, k_dst + h * g.head_dim, j, half, c, s);
    }
  }
  for (int64_t i = threadIdx.x; i < token_elems; i += blockDim.x) v_dst[i] = v[i];
}

}  // namespace

int RopeWriteKv(bool bf16, const RopeWriteKvArgs& a, int64_t n, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  const unsigned threads = 128;  // whole warps on both vendors; a head has at most 64 pairs
  if (bf16) {
    RopeWriteKvKernel<dev::Bf16><<<static_cast<unsigned>(n), threads, 0, st>>>(a);
  } else {
    RopeWriteKvKernel<dev::Fp16><<<static_cast<unsigned>(n), threads, 0, st>>>(a);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier::ops::gpu_launch
