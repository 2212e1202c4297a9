// Device side of Gemv (kernels/ops/gpu/gemm_gpu.h): y [m, n] = x [m, k] W [n, k]^T (+ bias) for the
// few rows of a decode step, where the work is reading W once, so the kernel is built for bytes in
// flight rather than arithmetic.
//
// A block owns kRowsPerBlock rows of W (output features) in kGroups groups of kRowsPerGroup; the
// warps of a group split the row's columns between them (interleaved 16-byte loads, 8 elements a
// lane, kUnroll loads per row issued before any arithmetic), so even a few long rows (the down
// projection: 4,096 rows of 14,336) keep many loads in flight. The x rows are read from global
// memory (every warp reads the same small x, so it stays in L1/L2); with kSiluMul they are the
// MLP's gate | up rows and the input is SiluAndMul of them, rounded as that operator rounds,
// computed as it is read (the down projection without the act buffer and its launch). Partial sums
// are float32 per lane, reduced over the warp, then over the group's warps in shared memory; one
// lane per row adds the bias and writes y.
//
// Launched as a programmatic dependent (pdl.h): the first pass's weight loads overlap the end of
// the kernel before it.
//
// Shape chosen on the H100 (Llama-3.1-8B decode shapes, weights not in L2): 4 rows a group, 4
// warps a group, 4 loads a row in flight gave 2.4-3.2 TB/s of weights read where 2 rows a warp
// and no column split gave 2.0-3.1 (the down projection 2.7 against 2.1).
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/launch.h"
#include "kernels/ops/gpu/pdl.h"

namespace kvtier::ops::gpu_launch {
namespace {

using dev::kWarpSize;

constexpr int kThreads = 256;
constexpr int kVec = 8;  // 16-bit elements per 16-byte load
constexpr int kGroups = 2;
constexpr int kRowsPerGroup = 4;
constexpr int kRowsPerBlock = kGroups * kRowsPerGroup;
constexpr int kUnroll = 4;
// Warps per group: 4 with 32-lane warps, 2 with 64; columns per pass are kThreads / kGroups * 8
// either way.
constexpr int kWarpsPerGroup = kThreads / kWarpSize / kGroups;
constexpr int64_t kPass = int64_t{kThreads} / kGroups * kVec;

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

// Elements col .. col + 7 of input row m: x itself, or silu(gate) * up of the gate | up row.
template <typename Fmt, bool kSiluMul>
__device__ __forceinline__ void LoadX(const GemvKernelArgs& a, int m, int64_t col,
                                      float (&x)[kVec]) {
  if (!kSiluMul) {
    dev::LoadVec<Fmt, kVec>(a.x + m * a.k + col, x);
    return;
  }
  float up[kVec];
  dev::LoadVec<Fmt, kVec>(a.x + m * 2 * a.k + col, x);
  dev::LoadVec<Fmt, kVec>(a.x + m * 2 * a.k + a.k + col, up);
#pragma unroll
  for (int i = 0; i < kVec; ++i)
    x[i] = Fmt::ToFloat(Fmt::FromFloat(x[i] / (1.0f + expf(-x[i])) * up[i]));
}

// Issues the loads of one pass: kUnroll column groups of the group's rows (zeros past k).
__device__ __forceinline__ void LoadW(const uint16_t* const (&rows)[kRowsPerGroup], int64_t col0,
                                      int64_t k, uint4 (&w)[kUnroll][kRowsPerGroup]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t col = col0 + u * kPass;
#pragma unroll
    for (int r = 0; r < kRowsPerGroup; ++r) {
      w[u][r] = col < k ? *reinterpret_cast<const uint4*>(rows[r] + col) : make_uint4(0, 0, 0, 0);
    }
  }
}

template <typename Fmt, int M, bool kSiluMul>
__device__ __forceinline__ void Accumulate(const GemvKernelArgs& a, int64_t col0,
                                           const uint4 (&w)[kUnroll][kRowsPerGroup],
                                           float (&acc)[M][kRowsPerGroup]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t col = col0 + u * kPass;
    if (col >= a.k) break;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float x[kVec];
      LoadX<Fmt, kSiluMul>(a, m, col, x);
#pragma unroll
      for (int r = 0; r < kRowsPerGroup; ++r) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[m][r] += x[i] * Elem<Fmt>(w[u][r], i);
      }
    }
  }
}

// Sums the group's warps' partial sums; lane r of the group's first warp writes row0 + r.
template <typename Fmt, int M>
__device__ __forceinline__ void Store(const GemvKernelArgs& a, int64_t row0, int warp_in_group,
                                      int group, float (&acc)[M][kRowsPerGroup],
                                      float (&partial)[kGroups][kWarpsPerGroup][M][kRowsPerGroup]) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerGroup; ++r) {
      acc[m][r] = dev::WarpSum(acc[m][r]);
      if (lane == 0) partial[group][warp_in_group][m][r] = acc[m][r];
    }
  }
  __syncthreads();
  if (warp_in_group != 0 || lane >= kRowsPerGroup || row0 + lane >= a.n) return;
  const int64_t row = row0 + lane;
  const float b = a.bias != nullptr ? Fmt::ToFloat(a.bias[row]) : 0.0f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float v = b;
    for (int p = 0; p < kWarpsPerGroup; ++p) v += partial[group][p][m][lane];
    if (a.y_float) {
      static_cast<float*>(a.y)[m * a.n + row] = v;
    } else {
      static_cast<uint16_t*>(a.y)[m * a.n + row] = Fmt::FromFloat(v);
    }
  }
}

template <typename Fmt, int M, bool kSiluMul>
__global__ void __launch_bounds__(kThreads) GemvKernel(GemvKernelArgs a) {
  __shared__ float partial[kGroups][kWarpsPerGroup][M][kRowsPerGroup];
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int group = warp / kWarpsPerGroup;
  const int warp_in_group = warp % kWarpsPerGroup;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + group * kRowsPerGroup;
  const uint16_t* rows[kRowsPerGroup];
#pragma unroll
  for (int r = 0; r < kRowsPerGroup; ++r) {
    rows[r] = a.w + (row0 + r < a.n ? row0 + r : 0) * a.k;  // past n: reread row 0, unused
  }
  float acc[M][kRowsPerGroup] = {};
  // The first pass's weights load before the wait for the kernel that writes x (pdl.h): no kernel
  // writes weights.
  pdl::AllowDependents();
  int64_t col0 = (static_cast<int64_t>(warp_in_group) * kWarpSize + lane) * kVec;
  uint4 w[kUnroll][kRowsPerGroup];
  LoadW(rows, col0, a.k, w);
  pdl::WaitForPrerequisites();
  while (col0 < a.k) {
    Accumulate<Fmt, M, kSiluMul>(a, col0, w, acc);
    col0 += kUnroll * kPass;
    if (col0 < a.k) LoadW(rows, col0, a.k, w);
  }
  Store<Fmt, M>(a, row0, warp_in_group, group, acc, partial);
}

template <typename Fmt, bool kSiluMul>
int LaunchRows(const GemvKernelArgs& a, int64_t m, void* stream) {
  const auto blocks = static_cast<unsigned>((a.n + kRowsPerBlock - 1) / kRowsPerBlock);
  const auto st = static_cast<cudaStream_t>(stream);
  switch (m) {
    case 1:
      return pdl::Launch(GemvKernel<Fmt, 1, kSiluMul>, blocks, kThreads, 0, st, a);
    case 2:
      return pdl::Launch(GemvKernel<Fmt, 2, kSiluMul>, blocks, kThreads, 0, st, a);
    case 3:
      return pdl::Launch(GemvKernel<Fmt, 3, kSiluMul>, blocks, kThreads, 0, st, a);
    default:
      return pdl::Launch(GemvKernel<Fmt, 4, kSiluMul>, blocks, kThreads, 0, st, a);
  }
}

template <typename Fmt>
int LaunchFmt(const GemvKernelArgs& a, int64_t m, bool silu_mul, void* stream) {
  return silu_mul ? LaunchRows<Fmt, true>(a, m, stream) : LaunchRows<Fmt, false>(a, m, stream);
}

}  // namespace

int Gemv(bool bf16, const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t m,
         int64_t n, int64_t k, void* y, bool y_float, bool silu_mul, void* stream) {
  const GemvKernelArgs a{x, w, bias, n, k, y, y_float};
  return bf16 ? LaunchFmt<dev::Bf16>(a, m, silu_mul, stream)
              : LaunchFmt<dev::Fp16>(a, m, silu_mul, stream);
}

}  // namespace kvtier::ops::gpu_launch
