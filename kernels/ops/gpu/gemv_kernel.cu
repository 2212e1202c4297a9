// Device side of Gemv (kernels/ops/gpu/gemm_gpu.h): y [m, n] = x [m, k] W [n, k]^T (+ bias) for the
// few rows of a decode step, where the work is reading W once, so the kernel is built for bytes in
// flight rather than arithmetic.
//
// A block owns kRowsPerBlock rows of W (output features), its warps kRowsPerWarp each (2 with
// 32-lane warps, 4 with 64), streamed with 16-byte loads, 8 elements per lane, kUnroll loads per
// row issued before any arithmetic. The x rows are read from
// global memory (every warp reads the same small x, so it stays in L1/L2). Partial sums are float32
// per lane, reduced over the warp at the end; lane 0 adds the bias and writes y.
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch {
namespace {

using dev::kWarpSize;

constexpr int kThreads = 256;
constexpr int kVec = 8;  // 16-bit elements per 16-byte load
constexpr int kRowsPerBlock = 16;
constexpr int kRowsPerWarp = kRowsPerBlock * kWarpSize / kThreads;
constexpr int kUnroll = 4;

template <typename Fmt>
__device__ __forceinline__ float Elem(const uint4& w, int i) {
  const uint32_t word = (&w.x)[i / 2];
  return Fmt::ToFloat(static_cast<uint16_t>(i % 2 == 0 ? word & 0xffffu : word >> 16));
}

struct GemvKernelArgs {
  const uint16_t* x;
  const uint16_t* w;
  const uint16_t* bias;
  int64_t n;
  int64_t k;
  void* y;
  bool y_float;
};

// Issues the loads of one pass: kUnroll column groups of this warp's rows (zeros past k).
__device__ __forceinline__ void LoadW(const uint16_t* const (&rows)[kRowsPerWarp], int64_t col0,
                                      int64_t k, uint4 (&w)[kUnroll][kRowsPerWarp]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t col = col0 + u * kWarpSize * kVec;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      w[u][r] = col < k ? *reinterpret_cast<const uint4*>(rows[r] + col) : make_uint4(0, 0, 0, 0);
    }
  }
}

template <typename Fmt, int M>
__device__ __forceinline__ void Accumulate(const GemvKernelArgs& a, int64_t col0,
                                           const uint4 (&w)[kUnroll][kRowsPerWarp],
                                           float (&acc)[M][kRowsPerWarp]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t col = col0 + u * kWarpSize * kVec;
    if (col >= a.k) break;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float x[kVec];
      dev::LoadVec<Fmt, kVec>(a.x + m * a.k + col, x);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[m][r] += x[i] * Elem<Fmt>(w[u][r], i);
      }
    }
  }
}

template <typename Fmt, int M>
__global__ void __launch_bounds__(kThreads) GemvKernel(GemvKernelArgs a) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock +
                       static_cast<int64_t>(threadIdx.x / kWarpSize) * kRowsPerWarp;
  if (row0 >= a.n) return;
  const uint16_t* rows[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    rows[r] = a.w + (row0 + r < a.n ? row0 + r : row0) * a.k;  // past n: reread row0, unused
  }
  float acc[M][kRowsPerWarp] = {};
  for (int64_t col0 = lane * kVec; col0 < a.k; col0 += kUnroll * kWarpSize * kVec) {
    uint4 w[kUnroll][kRowsPerWarp];
    LoadW(rows, col0, a.k, w);
    Accumulate<Fmt, M>(a, col0, w, acc);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) acc[m][r] = dev::WarpSum(acc[m][r]);
  }
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row0 + r;
    if (row >= a.n) break;
    const float b = a.bias != nullptr ? Fmt::ToFloat(a.bias[row]) : 0.0f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = acc[m][r] + b;
      if (a.y_float) {
        static_cast<float*>(a.y)[m * a.n + row] = v;
      } else {
        static_cast<uint16_t*>(a.y)[m * a.n + row] = Fmt::FromFloat(v);
      }
    }
  }
}

template <typename Fmt>
int LaunchFmt(const GemvKernelArgs& a, int64_t m, void* stream) {
  const auto blocks = static_cast<unsigned>((a.n + kRowsPerBlock - 1) / kRowsPerBlock);
  const auto st = static_cast<cudaStream_t>(stream);
  switch (m) {
    case 1:
      GemvKernel<Fmt, 1><<<blocks, kThreads, 0, st>>>(a);
      break;
    case 2:
      GemvKernel<Fmt, 2><<<blocks, kThreads, 0, st>>>(a);
      break;
    case 3:
      GemvKernel<Fmt, 3><<<blocks, kThreads, 0, st>>>(a);
      break;
    default:
      GemvKernel<Fmt, 4><<<blocks, kThreads, 0, st>>>(a);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int Gemv(bool bf16, const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t m,
         int64_t n, int64_t k, void* y, bool y_float, void* stream) {
  const GemvKernelArgs a{x, w, bias, n, k, y, y_float};
  return bf16 ? LaunchFmt<dev::Bf16>(a, m, stream) : LaunchFmt<dev::Fp16>(a, m, stream);
}

}  // namespace kvtier::ops::gpu_launch
