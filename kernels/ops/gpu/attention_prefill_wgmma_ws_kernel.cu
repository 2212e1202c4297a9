// Warp-specialised Hopper prefill (attention_prefill_wgmma.h): FlashAttention-3's schedule on the
// tiles of attention_prefill_wgmma_kernel.cu. A block of three warpgroups owns 128 query rows of
// one sequence and KV head:
//
//   warpgroup 0, the producer (72 registers a thread): gathers K and V tiles of 128 keys from the
//     pool's blocks by cp.async into three stages (a K and a V tile each), and arrives on a
//     stage's "full" mbarrier when its copies land (cp.async.mbarrier.arrive); it waits on the
//     stage's "empty" mbarrier (both consumers done with its P V) before refilling it.
//   warpgroups 1 and 2, the consumers (208 registers): 64 query rows each. Tile j's S = Q K_j^T
//     is issued before tile j - 1's O += P V_{j-1}, and the softmax of S_j runs while P V
//     computes (wgmma.wait_group 1); a stage is released as soon as the P V that read it is done.
//     With kPingPong the two consumers take turns issuing their matrix multiplies (named barriers 1
//     and 2), so one's softmax overlaps the other's tensor-core work.
//
// No __syncthreads after set-up: the consumers drift apart as far as the stages allow. Shared
// memory: Q 32 KiB + 3 stages x (K + V) 192 KiB; one block per multiprocessor, blocks of the
// longest causal rows first. Semantics and numerics are those of attention_prefill_wgmma_kernel.cu
// (the tiles' code is shared: attention_prefill_wgmma_tile.cuh).
#include <cstdint>

#include "kernels/device_caps.h"
#include "kernels/ops/gpu/attention_prefill_wgmma.h"
#include "kernels/ops/gpu/attention_prefill_wgmma_tile.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error \
    "attention_prefill_wgmma_ws_kernel.cu is compiled for sm_90a only (kernels/ops/gpu/CMakeLists.txt)"
#endif

namespace kvtier::ops::gpu_launch {
namespace {

using dev::kWarpSize;
using namespace wgmma;  // NOLINT: the tile vocabulary (attention_prefill_wgmma_tile.cuh)
static_assert(kWarpSize == 32, "wgmma fragments are laid out over 32-lane warps");

constexpr int kThreads = 384;  // producer + two consumer warpgroups
constexpr int kWg = 128;
constexpr int kProducerRegs = 72;
constexpr int kConsumerRegs = 208;  // 128 * 72 + 256 * 208 <= 64 Ki; both spill-free
constexpr int kQBar = 3;            // named barrier ids 3, 4: a consumer's Q is in

template <int kStages>
constexpr int SmemBytes() {
  return kQBytes + kStages * 2 * kTileBytes + 1024;  // + room to align to 1 KiB
}

// The block's mbarriers, 8 bytes each: kStages "full" (the stage's K and V tiles have landed),
// then kStages "empty" (both consumers are done with them).
template <int kStages>
struct Bars {
  uint32_t base;
  __device__ uint32_t Full(int s) const { return base + 8 * s; }
  __device__ uint32_t Empty(int s) const { return base + 8 * (kStages + s); }
};

template <int kStages>
__device__ __forceinline__ void Produce(const AttentionArgs& a, const Block& blk,
                                        const Bars<kStages>& bars, uint32_t k_smem, uint32_t v_smem,
                                        int tiles) {
  const int tid = threadIdx.x;
  const KvSource src = MakeKvSource(a, blk.b, blk.kv_head, tid % kChunks);
  for (int j = 0; j < tiles; ++j) {
    const int st = j % kStages;
    // The consumers' release of use j - kStages: that phase's parity.
    if (j >= kStages) MbarWait(bars.Empty(st), (j / kStages + 1) & 1);
    IssueTile<kWg>(src, blk.key_lo + j * kKeys, k_smem + st * kTileBytes, v_smem + st * kTileBytes,
                   tid);
    CpAsyncArrive(bars.Full(st));
  }
  CpAsyncWait<0>();  // nothing in flight at exit
}

// Waits for a full stage and makes its cp.async writes (generic proxy) visible to wgmma.
__device__ __forceinline__ void WaitFull(uint32_t bar, uint32_t parity) {
  MbarWait(bar, parity);
  FenceProxyAsync();
}

__device__ __forceinline__ void SoftmaxTile(float (&s)[64], Rows& r, const Whole& whole, int t0,
                                            float scale, int lane, float (&alpha)[2]) {
  if (whole.Tile(t0)) {
    Softmax<false>(s, r, t0, scale, lane, alpha);
  } else {
    Softmax<true>(s, r, t0, scale, lane, alpha);
  }
}

template <typename Fmt, int kStages, bool kPingPong>
__device__ __forceinline__ void Consume(const AttentionArgs& a, const Block& blk,
                                        const Bars<kStages>& bars, uint32_t q_smem, uint32_t k_smem,
                                        uint32_t v_smem, int tiles) {
  const int ctid = threadIdx.x - kWg;  // 0..255 over both consumers
  const int c = ctid / kWg;            // this consumer: rows 64c..64c + 63 of the block
  const int lane = ctid % kWarpSize;
  const int mine = 1 + c;   // the named barrier this consumer waits on for its turn
  const int other = 2 - c;  // the other's
  IssueQ<kWg, 64>(a, blk, q_smem, 64 * c, ctid % kWg);
  CpAsyncCommit();
  CpAsyncWait<0>();
  FenceProxyAsync();
  BarSync(kQBar + c, kWg);
  if (kPingPong && c == 1) BarArrive(other, 2 * kWg);  // consumer 0 goes first

  Rows r = InitRows(a, blk, ctid);
  const Whole whole = WholeTiles(a, blk, 64 * c, 64);
  const float scale = a.scale * kLog2e;
  const uint32_t q_wg = q_smem + c * 64 * 128;
  float o[64];
  float s[64];
  uint32_t p[kKeys / 16][4];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = s[i] = 0;
  float alpha[2];

  // Tile 0: S alone.
  WaitFull(bars.Full(0), 0);
  if (kPingPong) BarSync(mine, 2 * kWg);
  PinRegisters(s);
  Fence();
  IssueQk<Fmt>(s, q_wg, k_smem);
  Commit();
  if (kPingPong) BarArrive(other, 2 * kWg);
  Wait<0>();
  PinRegisters(s);
  SoftmaxTile(s, r, whole, blk.key_lo, scale, lane, alpha);
  PackP<Fmt>(s, p);

  // Tile j's S with tile j - 1's P V.
  for (int j = 1; j < tiles; ++j) {
    const int sk = j % kStages;
    const int sv = (j - 1) % kStages;
    WaitFull(bars.Full(sk), (j / kStages) & 1);  // tile j - 1's stage is in since its S
    if (kPingPong) BarSync(mine, 2 * kWg);
    PinRegisters(s);
    PinRegisters(o);
    PinRegisters(p);
    Fence();
    IssueQk<Fmt>(s, q_wg, k_smem + sk * kTileBytes);
    Commit();
    IssuePv<Fmt>(o, p, v_smem + sv * kTileBytes);
    Commit();
    if (kPingPong) BarArrive(other, 2 * kWg);
    Wait<1>();
    PinRegisters(s);
    SoftmaxTile(s, r, whole, blk.key_lo + j * kKeys, scale, lane, alpha);
    Wait<0>();
    PinRegisters(o);
    PinRegisters(p);
    MbarArrive(bars.Empty(sv));
    Rescale(o, alpha);
    PackP<Fmt>(s, p);
  }

  // The last tile's P V.
  const int sv = (tiles - 1) % kStages;
  if (kPingPong) BarSync(mine, 2 * kWg);
  PinRegisters(o);
  PinRegisters(p);
  Fence();
  IssuePv<Fmt>(o, p, v_smem + sv * kTileBytes);
  Commit();
  if (kPingPong && c == 0) BarArrive(other, 2 * kWg);  // consumer 1 has no turn left to give
  Wait<0>();
  PinRegisters(o);
  PinRegisters(p);
  StoreRows<Fmt>(a, blk, r, o, ctid);
}

template <typename Fmt, int kStages, bool kPingPong>
__global__ void __launch_bounds__(kThreads, 1)
    PrefillWsKernel(AttentionArgs a, const int32_t* q_indptr) {
  extern __shared__ uint4 smem[];
  __shared__ uint64_t barriers[2 * kStages];
  const uint32_t q_smem = (SmemAddr(smem) + 1023) & ~1023u;
  const uint32_t k_smem = q_smem + kQBytes;  // stage i at + i tiles
  const uint32_t v_smem = k_smem + kStages * kTileBytes;
  Block blk;
  if (!MakeBlock(a, q_indptr, blk)) return;  // the whole block, before any barrier
  const Bars<kStages> bars{SmemAddr(barriers)};
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) {
      MbarInit(bars.Full(st), kWg);       // every producer thread's cp.async arrival
      MbarInit(bars.Empty(st), 2 * kWg);  // every consumer thread
    }
  }
  __syncthreads();
  const int tiles = (blk.pos_hi - blk.key_lo) / kKeys + 1;
  if (threadIdx.x < kWg) {
    RegsLower<kProducerRegs>();
    Produce<kStages>(a, blk, bars, k_smem, v_smem, tiles);
  } else {
    RegsRaise<kConsumerRegs>();
    Consume<Fmt, kStages, kPingPong>(a, blk, bars, q_smem, k_smem, v_smem, tiles);
  }
}

template <typename Fmt, int kStages, bool kPingPong>
int Launch(const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len, void* stream) {
  const int64_t group = a.q_heads / a.kv.kv_heads;
  const int64_t tiles = (max_q_len * group + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(a.kv.kv_heads),
                  static_cast<unsigned>(a.batch));
  const auto kernel = PrefillWsKernel<Fmt, kStages, kPingPong>;
  const cudaError_t set = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               SmemBytes<kStages>());
  if (set != cudaSuccess) return static_cast<int>(set);
  kernel<<<grid, kThreads, SmemBytes<kStages>(), static_cast<cudaStream_t>(stream)>>>(a, q_indptr);
  return static_cast<int>(cudaGetLastError());
}

template <typename Fmt>
int LaunchVariant(WgmmaWsVariant v, const AttentionArgs& a, const int32_t* q_indptr,
                  int64_t max_q_len, void* stream) {
  constexpr int kStages = 3;  // two measured 332 TFLOP/s at 32K against three's 459
  switch (v) {
    case WgmmaWsVariant::kPingPong:
      return Launch<Fmt, kStages, true>(a, q_indptr, max_q_len, stream);
    case WgmmaWsVariant::kNoPingPong:
      return Launch<Fmt, kStages, false>(a, q_indptr, max_q_len, stream);
  }
  return kNoMmaKernel;
}

}  // namespace

int AttentionPrefillWgmmaWs(bool bf16, WgmmaWsVariant v, const AttentionArgs& a,
                            const int32_t* q_indptr, int64_t max_q_len, void* stream) {
  return bf16 ? LaunchVariant<dev::Bf16>(v, a, q_indptr, max_q_len, stream)
              : LaunchVariant<dev::Fp16>(v, a, q_indptr, max_q_len, stream);
}

}  // namespace kvtier::ops::gpu_launch
