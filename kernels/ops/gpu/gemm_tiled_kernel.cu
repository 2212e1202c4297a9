// Device side of GemmTiled (kernels/ops/gpu/gemm_gpu.h): y = x w^T (+ bias) with both operands
// k-contiguous ("TN"), our own kernel for vendors without a BLAS (Debian's ROCm has no rocBLAS or
// hipBLASLt) and the reference that the CUDA build checks cuBLASLt's layout conventions against.
//
// Classic shared-memory tiling in float32: a block of 256 threads computes a 64 x 64 tile of y,
// stepping through k 32 at a time; each thread loads 8 + 8 elements of the x and w tiles (one
// 16-byte access each), stores them k-major into shared memory, and accumulates a 4 x 4 sub-tile.
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch {
namespace {

constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kTileK = 32;
constexpr int kThreads = 256;
constexpr int kPad = 4;  // keeps the transposed stores off one bank

// Loads rows [row0, row0 + 64) x k [k0, k0 + 32) of a [rows, k] matrix, transposed into t[k][row].
template <typename Fmt>
__device__ __forceinline__ void LoadTile(const uint16_t* src, int64_t rows, int64_t k, int64_t row0,
                                         int64_t k0, float (*t)[kTileM + kPad]) {
  const int r = threadIdx.x / (kTileK / 8);
  const int c = threadIdx.x % (kTileK / 8) * 8;
  float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (row0 + r < rows && k0 + c < k) dev::LoadVec<Fmt, 8>(src + (row0 + r) * k + k0 + c, v);
#pragma unroll
  for (int i = 0; i < 8; ++i) t[c + i][r] = v[i];
}

template <typename Fmt>
__global__ void __launch_bounds__(kThreads)
    GemmKernel(const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t m, int64_t n,
               int64_t k, void* y, bool y_float) {
  __shared__ float xs[kTileK][kTileM + kPad];
  __shared__ float ws[kTileK][kTileN + kPad];
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const int tm = threadIdx.x / 16 * 4;  // this thread's 4 rows of the tile
  const int tn = threadIdx.x % 16 * 4;  // and 4 columns
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    __syncthreads();
    LoadTile<Fmt>(x, m, k, m0, k0, xs);
    LoadTile<Fmt>(w, n, k, n0, k0, ws);
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTileK; ++kk) {
      const float4 a = *reinterpret_cast<const float4*>(&xs[kk][tm]);
      const float4 b = *reinterpret_cast<const float4*>(&ws[kk][tn]);
      const float av[4] = {a.x, a.y, a.z, a.w};
      const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = m0 + tm + i;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t col = n0 + tn + j;
      if (col >= n) continue;
      const float out = acc[i][j] + (bias != nullptr ? Fmt::ToFloat(bias[col]) : 0.0f);
      if (y_float) {
        static_cast<float*>(y)[row * n + col] = out;
      } else {
        static_cast<uint16_t*>(y)[row * n + col] = Fmt::FromFloat(out);
      }
    }
  }
}

}  // namespace

int GemmTiled(bool bf16, const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t m,
              int64_t n, int64_t k, void* y, bool y_float, void* stream) {
  if (m <= 0 || n <= 0) return 0;
  const dim3 grid(static_cast<unsigned>((n + kTileN - 1) / kTileN),
                  static_cast<unsigned>((m + kTileM - 1) / kTileM));
  const auto st = static_cast<cudaStream_t>(stream);
  if (bf16) {
    GemmKernel<dev::Bf16><<<grid, kThreads, 0, st>>>(x, w, bias, m, n, k, y, y_float);
  } else {
    GemmKernel<dev::Fp16><<<grid, kThreads, 0, st>>>(x, w, bias, m, n, k, y, y_float);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier::ops::gpu_launch
