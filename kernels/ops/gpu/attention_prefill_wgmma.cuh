// Device helpers of the Hopper prefill kernel (attention_prefill_wgmma_kernel.cu): warpgroup matrix
// multiplies (PTX wgmma.mma_async, sm_90a only), their shared-memory descriptors, and cp.async.
// Included by that file alone.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/device_caps.h"

namespace kvtier::ops::gpu_launch::wgmma {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Tiles in shared memory use the 128-byte swizzle of wgmma (and TMA): a tile of `rows` rows of 128
// 16-bit elements is two halves of 64 columns, [half][row][64], each row 128 bytes, and the 16-byte
// chunk c (0..7) of a row r sits at chunk c ^ (r % 8). Every tile starts 1024-byte aligned, so the
// hardware's swizzle (byte address bits 4-6 ^= bits 7-9) matches. chunk: 0..15 over the full row.
__device__ __forceinline__ uint32_t SwizzledOffset(int rows, int r, int chunk) {
  return static_cast<uint32_t>((chunk / 8) * rows * 128 + r * 128 + (((chunk % 8) ^ (r % 8)) * 16));
}

// The 64-bit matrix descriptor: start address, leading and stride byte offsets (all >> 4), the
// 128-byte swizzle mode (1 in bits 62-63). K-major operands: `sbo` = 1024, the stride of 8-row
// groups; `lbo` is unused. MN-major (V for P V): `lbo` the stride of 64-element column halves,
// `sbo` of 8-row groups.
__device__ __forceinline__ uint64_t Descriptor(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<uint64_t>(lbo >> 4) << 16 |
         static_cast<uint64_t>(sbo >> 4) << 32 | uint64_t{1} << 62;
}

__device__ __forceinline__ void Fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void Commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void Wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accesses of accumulator registers across a wgmma fence or wait.
template <int N>
__device__ __forceinline__ void PinRegisters(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define KVTIER_WG_D                                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}"
#define KVTIER_WG_F8(d, i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define KVTIER_WG_OUT(d)                                                            \
  KVTIER_WG_F8(d, 0), KVTIER_WG_F8(d, 8), KVTIER_WG_F8(d, 16), KVTIER_WG_F8(d, 24), \
      KVTIER_WG_F8(d, 32), KVTIER_WG_F8(d, 40), KVTIER_WG_F8(d, 48), KVTIER_WG_F8(d, 56)

// d (64 x 128, float32) = A (64 x 16, shared, K-major) * B (16 x 128, shared, K-major) (+ d when
// accumulate). The warpgroup's 128 threads each hold 64 accumulators in mma.sync's m16n8 layout:
// warp w rows 16w.., d[4j + e] at row lane / 4 + 8 (e / 2), column 8j + 2 (lane % 4) + e % 2.
template <typename Fmt>
__device__ __forceinline__ void MmaSs(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
  if constexpr (std::is_same_v<Fmt, dev::Bf16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " KVTIER_WG_D
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : KVTIER_WG_OUT(d)
        : "l"(a), "l"(b), "r"(accumulate));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " KVTIER_WG_D
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : KVTIER_WG_OUT(d)
        : "l"(a), "l"(b), "r"(accumulate));
  }
}

// d (64 x 128) += A (64 x 16, registers: mma.sync's m16k16 A fragment per warp) * B (16 x 128,
// shared, MN-major: the V tile as stored, transposed by the instruction).
template <typename Fmt>
__device__ __forceinline__ void MmaRs(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (std::is_same_v<Fmt, dev::Bf16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " KVTIER_WG_D
        ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : KVTIER_WG_OUT(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " KVTIER_WG_D
        ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : KVTIER_WG_OUT(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
}

#undef KVTIER_WG_OUT
#undef KVTIER_WG_F8
#undef KVTIER_WG_D

// Asynchronous 16-byte copy global -> shared, zero-filled when !valid (src unread).
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
// Makes this thread's completed shared-memory writes visible to the async proxy wgmma reads by.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Shared-memory barriers (mbarrier), CTA scope. A phase completes when `count` arrivals have come;
// waiters name the parity of the phase they wait for (0 for the first).
__device__ __forceinline__ void MbarInit(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// One arrival on `bar` once every cp.async this thread issued before it has landed (.noinc: the
// arrival counts against the barrier's expected count).
__device__ __forceinline__ void CpAsyncArrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// The stage's expected bytes of tensor copies, with one arrival.
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Tensor copy (TMA) of one box of a 3-D tensor map to shared memory at dst; the bytes complete on
// the mbarrier `bar`. map: the generic address of a __grid_constant__ CUtensorMap.
__device__ __forceinline__ void TmaLoad3d(uint32_t dst, const void* map, int c0, int c1, int c2,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4}], [%5];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// Named barriers (ids 1..15; 0 is __syncthreads): sync waits, arrive does not; `threads` counts
// both.
__device__ __forceinline__ void BarSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void BarArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Moves registers between warpgroups (every thread of the warpgroup runs it).
template <int kRegs>
__device__ __forceinline__ void RegsRaise() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void RegsLower() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <int N>
__device__ __forceinline__ void PinRegisters(uint32_t (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    asm volatile("" : "+r"(d[i][0]), "+r"(d[i][1]), "+r"(d[i][2]), "+r"(d[i][3])::"memory");
  }
}

__device__ __forceinline__ float Exp2(float x) {  // ex2.approx: 2^-inf = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace kvtier::ops::gpu_launch::wgmma
