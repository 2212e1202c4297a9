// Device-side capabilities and helpers for kvtier's kernels, one spelling for CUDA and HIP
// (DESIGN.md "GPU code: one source, two vendors"). Kernels test what the hardware can do through
// the names here — the warp's width as a value, warp reductions, 16-bit float formats — never the
// vendor's name. Included only by device sources (*.cu), after kernels/gpu_vendor.h.
//
// Warp width: kWarpSize is the width of the target being compiled (32 on NVIDIA, 64 on gfx90a),
// meaningful in device code only: in the host pass of a HIP build it holds the device value of the
// default target, so launchers never derive thread counts from it. Launchers use block sizes that
// are multiples of 64, which hold whole warps on both vendors, and kernels compute warps per block
// as blockDim.x / kWarpSize.
//
// 16-bit formats: tensors of bf16 or fp16 are uint16_t arrays on both sides of the launch; kernels
// are templated on a format (Bf16 or Fp16) that converts one element to and from float. bf16 is
// converted with integer arithmetic (round to nearest even, NaN kept quiet), identical everywhere;
// fp16 with the vendor's conversion intrinsics (same names in both runtimes).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/gpu_vendor.h"

namespace kvtier::dev {

#if defined(__AMDGCN_WAVEFRONT_SIZE)
inline constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#elif defined(KVTIER_GPU_HIP)
inline constexpr int kWarpSize = 64;  // HIP host pass: gfx90a's width (see above)
#else
inline constexpr int kWarpSize = 32;  // NVIDIA: every architecture's warp (PTX WARP_SZ)
#endif

// KVTIER_HAS_PTX_MMA: the compiler emits PTX, so warp-level matrix multiply (mma.sync.m16n8k16,
// ldmatrix) can be written inline; the devices that execute it are sm_80 and later, which a
// launcher checks at run time (cudaDevAttrComputeCapabilityMajor) before choosing such a kernel.
#if defined(__CUDACC__) && !defined(__HIP__) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
#define KVTIER_HAS_PTX_MMA 1
#endif

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int m = kWarpSize / 2; m > 0; m /= 2) v += __shfl_xor_sync(~0u, v, m);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int m = kWarpSize / 2; m > 0; m /= 2) v = fmaxf(v, __shfl_xor_sync(~0u, v, m));
  return v;
}

// Sum over all threads of the block (blockDim.x a multiple of kWarpSize, at most 1024); every
// thread gets the result. `scratch` holds one float per warp; the call synchronizes the block.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

struct Bf16 {
  __device__ __forceinline__ static float ToFloat(uint16_t b) {
    return __uint_as_float(static_cast<uint32_t>(b) << 16);
  }
  __device__ __forceinline__ static uint16_t FromFloat(float f) {
    const uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

struct Fp16 {
  __device__ __forceinline__ static float ToFloat(uint16_t b) {
    return __half2float(__ushort_as_half(b));
  }
  __device__ __forceinline__ static uint16_t FromFloat(float f) {
    return __half_as_ushort(__float2half_rn(f));
  }
};

// N consecutive 16-bit elements (N = 2, 4 or 8; p aligned to 2N bytes) to and from floats, in one
// memory access.
template <typename Fmt, int N>
__device__ __forceinline__ void LoadVec(const uint16_t* p, float* out) {
  static_assert(N == 2 || N == 4 || N == 8, "2, 4 or 8 elements");
  using Word =
      typename std::conditional<N == 8, uint4,
                                typename std::conditional<N == 4, uint2, uint32_t>::type>::type;
  const Word w = *reinterpret_cast<const Word*>(p);
  const auto* h = reinterpret_cast<const uint16_t*>(&w);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = Fmt::ToFloat(h[i]);
}

template <typename Fmt, int N>
__device__ __forceinline__ void StoreVec(uint16_t* p, const float* in) {
  static_assert(N == 2 || N == 4 || N == 8, "2, 4 or 8 elements");
  using Word =
      typename std::conditional<N == 8, uint4,
                                typename std::conditional<N == 4, uint2, uint32_t>::type>::type;
  Word w;
  auto* h = reinterpret_cast<uint16_t*>(&w);
#pragma unroll
  for (int i = 0; i < N; ++i) h[i] = Fmt::FromFloat(in[i]);
  *reinterpret_cast<Word*>(p) = w;
}

}  // namespace kvtier::dev
