// Device side of kernels/kv_copy.h's kernel path: one launch moves every (block, layer, K|V) piece
// of a batch. Thread blocks take pieces in payload order (grid-stride), so neighbouring blocks
// touch neighbouring payload bytes; the threads of a block move one piece in access units of
// params.unit_bytes, each thread loading kUnroll units before storing any, to keep many reads in
// flight (what reaching line rate over PCIe from mapped host memory needs).
#include <cstdint>

#include "kernels/gpu_vendor.h"
#include "kernels/kv_copy_launch.h"

namespace kvtier {
namespace {

constexpr uint32_t kUnroll = 4;

// Byte offset in the engine piece of access unit `u` of the payload piece.
template <typename U>
__device__ __forceinline__ int64_t CacheOffset(const KvCopyParams& p, uint32_t u,
                                               uint32_t units_per_row) {
  if (p.pieces_contiguous) return int64_t{u} * static_cast<int64_t>(sizeof(U));
  const uint32_t row = u / units_per_row;
  const uint32_t col = u - row * units_per_row;
  const uint32_t token = row / p.kv_heads;
  const uint32_t head = row - token * p.kv_heads;
  return int64_t{token} * p.token_stride + int64_t{head} * p.head_stride +
         int64_t{col} * static_cast<int64_t>(sizeof(U));
}

template <typename U>
__device__ __forceinline__ void CopyPiece(const KvCopyParams& p, char* cache, char* payload) {
  const uint32_t units_per_row = p.row_bytes / sizeof(U);
  const uint32_t units = units_per_row * p.rows_per_piece;
  U* payload_units = reinterpret_cast<U*>(payload);
  for (uint32_t base = threadIdx.x; base < units; base += blockDim.x * kUnroll) {
    U buf[kUnroll];
#pragma unroll
    for (uint32_t k = 0; k < kUnroll; ++k) {
      const uint32_t u = base + k * blockDim.x;
      if (u >= units) continue;
      U* engine = reinterpret_cast<U*>(cache + CacheOffset<U>(p, u, units_per_row));
      buf[k] = p.to_payload ? *engine : payload_units[u];
    }
#pragma unroll
    for (uint32_t k = 0; k < kUnroll; ++k) {
      const uint32_t u = base + k * blockDim.x;
      if (u >= units) continue;
      U* engine = reinterpret_cast<U*>(cache + CacheOffset<U>(p, u, units_per_row));
      if (p.to_payload) {
        payload_units[u] = buf[k];
      } else {
        *engine = buf[k];
      }
    }
  }
}

template <typename U>
__global__ void KvCopyKernel(KvCopyParams p) {
  const uint64_t pieces = uint64_t{p.num_blocks} * p.num_layers * 2;
  for (uint64_t piece = blockIdx.x; piece < pieces; piece += gridDim.x) {
    const uint32_t kv = static_cast<uint32_t>(piece % 2);
    const uint32_t layer = static_cast<uint32_t>((piece / 2) % p.num_layers);
    const uint64_t i = piece / 2 / p.num_layers;
    const int64_t block = static_cast<int64_t>(p.entries[2 * i]);
    char* payload =
        reinterpret_cast<char*>(p.entries[2 * i + 1]) + (uint64_t{layer} * 2 + kv) * p.piece_bytes;
    char* cache = reinterpret_cast<char*>(p.layer_bases[2 * layer + kv]) + block * p.block_stride;
    CopyPiece<U>(p, cache, payload);
  }
}

template <typename U>
int Launch(const KvCopyParams& p, unsigned grid, unsigned threads, cudaStream_t stream) {
  KvCopyKernel<U><<<grid, threads, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

template <typename U>
int Preload() {
  cudaFuncAttributes attributes;
  return static_cast<int>(
      cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&KvCopyKernel<U>)));
}

}  // namespace

int PreloadKvCopyKernels() {
  for (int rc : {Preload<uint4>(), Preload<uint2>(), Preload<uint32_t>(), Preload<uint16_t>(),
                 Preload<uint8_t>()}) {
    if (rc != 0) return rc;
  }
  return 0;
}

int LaunchKvCopy(const KvCopyParams& params, unsigned grid, unsigned threads, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (params.unit_bytes) {
    case 16:
      return Launch<uint4>(params, grid, threads, s);
    case 8:
      return Launch<uint2>(params, grid, threads, s);
    case 4:
      return Launch<uint32_t>(params, grid, threads, s);
    case 2:
      return Launch<uint16_t>(params, grid, threads, s);
    default:
      return Launch<uint8_t>(params, grid, threads, s);
  }
}

}  // namespace kvtier
