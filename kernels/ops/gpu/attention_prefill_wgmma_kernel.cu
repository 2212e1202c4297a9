// Hopper variant of AttentionPrefill (attention_prefill_wgmma.h), the simpler of two and no longer
// the default (KVTIER_PREFILL_KERNEL=wgmma-sync; attention_prefill_wgmma_ws_kernel.cu is faster):
// FlashAttention-3's matrix multiplies — warpgroup-wide wgmma.mma_async, S = Q K^T with both
// operands in shared memory and O += P V with P in registers — without its producer warpgroup:
// every thread stages K/V by cp.async, and one __syncthreads a tile keeps the warpgroups in step.
// This file also holds the launcher that picks between the two. head_dim 128 only; compiled for
// sm_90a alone (wgmma exists nowhere else), so the launcher runs it on compute capability 9.0
// devices only. The semantics are the SIMT kernel's (attention_prefill_kernel.cu); the numerics the
// mma.sync kernel's (P rounded to the format before P V).
//
// A thread block (two warpgroups, 256 threads) owns 128 query rows of one sequence and one KV head,
// rows being (token, query head of the group) pairs in token-major order, 64 rows per warpgroup.
// K and V tiles of 128 keys go through two stages of shared memory: tile j + 1 loads while tile j
// is computed. All tiles use the 128-byte swizzle (attention_prefill_wgmma.cuh), Q stays in shared
// memory for the whole block. Shared memory: Q 32 KiB + 2 stages x (K + V) 128 KiB; one block per
// multiprocessor. Blocks of the longest causal rows are launched first.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/attention_prefill_wgmma.h"
#include "kernels/ops/gpu/attention_prefill_wgmma_tile.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error \
    "attention_prefill_wgmma_kernel.cu is compiled for sm_90a only (kernels/ops/gpu/CMakeLists.txt)"
#endif

namespace kvtier::ops::gpu_launch {
namespace {

using dev::kWarpSize;
using namespace wgmma;  // NOLINT: the tile vocabulary (attention_prefill_wgmma_tile.cuh)
static_assert(kWarpSize == 32, "wgmma fragments are laid out over 32-lane warps");

constexpr int kThreads = 256;  // two warpgroups
constexpr int kStages = 2;
constexpr int kSmemBytes = kQBytes + kStages * 2 * kTileBytes + 1024;  // + room to align to 1 KiB

template <typename Fmt>
__global__ void __launch_bounds__(kThreads, 1)
    PrefillWgmmaKernel(AttentionArgs a, const int32_t* q_indptr) {
  extern __shared__ uint4 smem[];
  const uint32_t q_smem = (SmemAddr(smem) + 1023) & ~1023u;
  const uint32_t kv_smem = q_smem + kQBytes;  // stage i: K at + 2i tiles, V at + 2i + 1
  Block blk;
  if (!MakeBlock(a, q_indptr, blk)) return;
  const int tid = threadIdx.x;
  const KvSource src = MakeKvSource(a, blk.b, blk.kv_head, tid % kChunks);
  Rows r = InitRows(a, blk, tid);
  const Whole whole = WholeTiles(a, blk, 0, kRows);
  const int lane = tid % kWarpSize;

  IssueQ<kThreads, kRows>(a, blk, q_smem, 0, tid);
  IssueTile<kThreads>(src, blk.key_lo, kv_smem, kv_smem + kTileBytes, tid);
  CpAsyncCommit();

  const float scale = a.scale * kLog2e;
  const uint32_t q_wg = q_smem + tid / 128 * 64 * 128;  // this warpgroup's 64 rows
  float o[64];
  float s[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = s[i] = 0;
  int stage = 0;
  for (int t0 = blk.key_lo; t0 <= blk.pos_hi; t0 += kKeys) {
    CpAsyncWait<0>();
    FenceProxyAsync();
    __syncthreads();  // tile t0 is in; every warp is done with the other stage
    const uint32_t k_smem = kv_smem + stage * 2 * kTileBytes;
    const uint32_t v_smem = k_smem + kTileBytes;
    if (t0 + kKeys <= blk.pos_hi) {
      const uint32_t next = kv_smem + (stage ^ 1) * 2 * kTileBytes;
      IssueTile<kThreads>(src, t0 + kKeys, next, next + kTileBytes, tid);
    }
    CpAsyncCommit();

    PinRegisters(s);
    Fence();
    IssueQk<Fmt>(s, q_wg, k_smem);
    Commit();
    Wait<0>();
    PinRegisters(s);

    float alpha[2];
    if (whole.Tile(t0)) {
      Softmax<false>(s, r, t0, scale, lane, alpha);
    } else {
      Softmax<true>(s, r, t0, scale, lane, alpha);
    }
    Rescale(o, alpha);
    uint32_t p[kKeys / 16][4];
    PackP<Fmt>(s, p);
    PinRegisters(o);
    Fence();
    IssuePv<Fmt>(o, p, v_smem);
    Commit();
    Wait<0>();
    PinRegisters(o);
    stage ^= 1;
  }
  CpAsyncWait<0>();  // nothing in flight at exit
  StoreRows<Fmt>(a, blk, r, o, tid);
}

template <typename Fmt>
int Launch(const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len, void* stream) {
  const int64_t group = a.q_heads / a.kv.kv_heads;
  const int64_t tiles = (max_q_len * group + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(tiles * a.kv_splits), static_cast<unsigned>(a.kv.kv_heads),
                  static_cast<unsigned>(a.batch));
  const cudaError_t set = cudaFuncSetAttribute(
      PrefillWgmmaKernel<Fmt>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (set != cudaSuccess) return static_cast<int>(set);
  PrefillWgmmaKernel<Fmt>
      <<<grid, kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(a, q_indptr);
  return static_cast<int>(cudaGetLastError());
}

bool DeviceIsSm90() {
  int device = 0;
  int major = 0;
  int minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
}

}  // namespace

int AttentionPrefillWgmma(bool bf16, const AttentionArgs& a, const int32_t* q_indptr,
                          int64_t max_q_len, void* stream) {
  if (a.kv.head_dim != kD || !(a.scale > 0)) return kNoMmaKernel;
  const char* env = std::getenv("KVTIER_PREFILL_KERNEL");
  const std::string_view pick = env != nullptr ? env : "";
  if (pick == "mma" || !DeviceIsSm90()) return kNoMmaKernel;
  if (pick == "wgmma-sync") {
    return bf16 ? Launch<dev::Bf16>(a, q_indptr, max_q_len, stream)
                : Launch<dev::Fp16>(a, q_indptr, max_q_len, stream);
  }
  const WgmmaWsVariant v = pick == "ws" ? WgmmaWsVariant::kCpAsync : WgmmaWsVariant::kTma;
  return AttentionPrefillWgmmaWs(bf16, v, a, q_indptr, max_q_len, stream);
}

}  // namespace kvtier::ops::gpu_launch
