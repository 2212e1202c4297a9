// Warp-specialised Hopper prefill (attention_prefill_wgmma.h), the default on the H100:
// FlashAttention-3's schedule on the tiles of attention_prefill_wgmma_kernel.cu. A block of three
// warpgroups owns 128 query rows of one sequence and KV head:
//
//   warpgroup 0, the producer (72 registers a thread): fills three stages (a K and a V tile of 128
//     keys each) and signals a stage's "full" mbarrier when it is in; it waits on the stage's
//     "empty" mbarrier (both consumers done with its P V) before refilling it. With kTma one
//     thread copies each pool block's rows of the tile by TMA (a tensor map over the pool, box =
//     one block's rows of one head: the pool's 16-token blocks are gathered through the block
//     table without a descriptor per block); otherwise, and for a tile running past the
//     sequence's end (zeros there), the warpgroup's threads copy 16-byte pieces by cp.async.
//   warpgroups 1 and 2, the consumers (208 registers): 64 query rows each. Tile j's S = Q K_j^T
//     is issued before tile j - 1's O += P V_{j-1}, and the softmax of S_j runs while P V
//     computes (wgmma.wait_group 1); a stage is released as soon as the P V that read it is done.
//     With kPingPong (always) the two consumers take turns issuing their matrix multiplies (named
//     barriers 1 and 2), so one's softmax overlaps the other's tensor-core work.
//
// No __syncthreads after set-up: the consumers drift apart as far as the stages allow. Shared
// memory: Q 32 KiB + 3 stages x (K + V) 192 KiB; one block per multiprocessor, blocks of the
// longest causal rows first. Semantics and numerics are those of attention_prefill_wgmma_kernel.cu
// (the tiles' code is shared: attention_prefill_wgmma_tile.cuh).
#include <cuda.h>  // CUtensorMap and its encoder's signature; the encoder comes from the runtime

#include <algorithm>
#include <cstdint>
#include <mutex>

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
constexpr int kProducerBar = 5;

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

// The producer with tensor copies: one thread issues, per pool block of the tile, a box of
// block_tokens rows x 64 columns for each half of K and of V (kv_map: the pool as [rows of
// head_dim][kv_head][head_dim], a row being one (slot, layer, K or V, token)); the full barrier
// expects one arrival and the tile's bytes. A tile running past kv_len (the last, at most) is
// staged by cp.async with zeros past the end, as Produce does, by the whole warpgroup, which waits
// for its copies before the one arrival.
template <int kStages>
__device__ __forceinline__ void ProduceTma(const AttentionArgs& a, const Block& blk,
                                           const Bars<kStages>& bars, uint32_t k_smem,
                                           uint32_t v_smem, int tiles, const CUtensorMap* map) {
  const int tid = threadIdx.x;
  const KvSource src = MakeKvSource(a, blk.b, blk.kv_head, tid % kChunks);
  const int bt = src.block_tokens;  // a power of two, 8..kKeys (the launcher checks)
  const bool tail = blk.key_lo + (tiles - 1) * kKeys + kKeys > src.kv_len;
  const int whole = tail ? tiles - 1 : tiles;
  if (tid == 0) {
    const int64_t layer_rows = a.layer * 2 * bt;
    for (int j = 0; j < whole; ++j) {
      const int st = j % kStages;
      if (j >= kStages) MbarWait(bars.Empty(st), (j / kStages + 1) & 1);
      MbarExpectTx(bars.Full(st), 2 * kTileBytes);
      const int t0 = blk.key_lo + j * kKeys;
      for (int m = 0; m < kKeys / bt; ++m) {
        const int64_t slot = src.table[(t0 >> src.shift) + m];
        const int row = static_cast<int>(slot * a.kv.layers * 2 * bt + layer_rows);
        const uint32_t at = st * kTileBytes + m * bt * 128;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t half = h * kKeys * 128;
          TmaLoad3d(k_smem + at + half, map, h * 64, static_cast<int>(blk.kv_head), row,
                    bars.Full(st));
          TmaLoad3d(v_smem + at + half, map, h * 64, static_cast<int>(blk.kv_head), row + bt,
                    bars.Full(st));
        }
      }
    }
  }
  if (!tail) return;
  const int j = tiles - 1;
  const int st = j % kStages;
  // Only thread 0 followed the stage's phases: a parity wait from further behind than one phase
  // would pass at once.
  if (tid == 0 && j >= kStages) MbarWait(bars.Empty(st), (j / kStages + 1) & 1);
  BarSync(kProducerBar, kWg);
  IssueTile<kWg>(src, blk.key_lo + j * kKeys, k_smem + st * kTileBytes, v_smem + st * kTileBytes,
                 tid);
  CpAsyncWait<0>();
  FenceProxyAsync();
  BarSync(kProducerBar, kWg);  // every producer thread's rows are in
  if (tid == 0) MbarArrive(bars.Full(st));
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

template <typename Fmt, int kStages, bool kPingPong, bool kTma>
__global__ void __launch_bounds__(kThreads, 1)
    PrefillWsKernel(AttentionArgs a, const int32_t* q_indptr,
                    const __grid_constant__ CUtensorMap kv_map) {
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
      MbarInit(bars.Full(st), kTma ? 1 : kWg);  // the issuing thread, or every producer thread
      MbarInit(bars.Empty(st), 2 * kWg);        // every consumer thread
    }
  }
  __syncthreads();
  const int tiles = (blk.pos_hi - blk.key_lo) / kKeys + 1;
  if (threadIdx.x < kWg) {
    RegsLower<kProducerRegs>();
    if (kTma) {
      ProduceTma<kStages>(a, blk, bars, k_smem, v_smem, tiles, &kv_map);
    } else {
      Produce<kStages>(a, blk, bars, k_smem, v_smem, tiles);
    }
  } else {
    RegsRaise<kConsumerRegs>();
    Consume<Fmt, kStages, kPingPong>(a, blk, bars, q_smem, k_smem, v_smem, tiles);
  }
}

// The pool as a 3-D tensor for TMA (ProduceTma); false when this pool cannot be one (block size
// not a power of two in 8..kKeys, or the driver refuses), and the cp.async producer serves.
bool EncodeKvMap(const AttentionArgs& a, CUtensorMap* map) {
  const int64_t bt = a.kv.block_tokens;
  if (bt < 8 || bt > kKeys || (bt & (bt - 1)) != 0) return false;
  using Encode = decltype(&cuTensorMapEncodeTiled);  // the type only: no libcuda link
  static Encode encode = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess) {
      encode = reinterpret_cast<Encode>(fn);
    }
    (void)cudaGetLastError();
  });
  if (encode == nullptr) return false;
  const uint64_t row_bytes = static_cast<uint64_t>(a.kv.kv_heads) * kD * 2;
  // Rows: as many as 2^40 bytes hold (the largest a stride may span); only rows of blocks in the
  // tables are read.
  const cuuint64_t dims[3] = {kD, static_cast<cuuint64_t>(a.kv.kv_heads),
                              std::min<uint64_t>((uint64_t{1} << 40) / row_bytes, 1u << 31)};
  const cuuint64_t strides[2] = {kD * 2, row_bytes};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(bt)};
  const cuuint32_t steps[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<uint16_t*>(a.pool), dims,
                strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename Fmt, int kStages, bool kPingPong, bool kTma>
int Launch(const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len,
           const CUtensorMap& map, void* stream) {
  const int64_t group = a.q_heads / a.kv.kv_heads;
  const int64_t tiles = (max_q_len * group + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(tiles * a.kv_splits), static_cast<unsigned>(a.kv.kv_heads),
                  static_cast<unsigned>(a.batch));
  const auto kernel = PrefillWsKernel<Fmt, kStages, kPingPong, kTma>;
  const cudaError_t set = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               SmemBytes<kStages>());
  if (set != cudaSuccess) return static_cast<int>(set);
  kernel<<<grid, kThreads, SmemBytes<kStages>(), static_cast<cudaStream_t>(stream)>>>(a, q_indptr,
                                                                                      map);
  return static_cast<int>(cudaGetLastError());
}

template <typename Fmt>
int LaunchVariant(WgmmaWsVariant v, const AttentionArgs& a, const int32_t* q_indptr,
                  int64_t max_q_len, void* stream) {
  constexpr int kStages = 3;  // two measured 332 TFLOP/s at 32K against three's 459 (cp.async)
  // Ping-pong: without it 451 against 459 at 32K (cp.async producer).
  constexpr bool kPingPong = true;
  CUtensorMap map{};
  if (v == WgmmaWsVariant::kTma && EncodeKvMap(a, &map)) {
    return Launch<Fmt, kStages, kPingPong, true>(a, q_indptr, max_q_len, map, stream);
  }
  return Launch<Fmt, kStages, kPingPong, false>(a, q_indptr, max_q_len, map, stream);
}

}  // namespace

int AttentionPrefillWgmmaWs(bool bf16, WgmmaWsVariant v, const AttentionArgs& a,
                            const int32_t* q_indptr, int64_t max_q_len, void* stream) {
  return bf16 ? LaunchVariant<dev::Bf16>(v, a, q_indptr, max_q_len, stream)
              : LaunchVariant<dev::Fp16>(v, a, q_indptr, max_q_len, stream);
}

}  // namespace kvtier::ops::gpu_launch
