// GPU attention (kernels/ops/gpu/attention_gpu.h) against ref::AttentionPrefill / AttentionDecode
// over one pool of block-major slots with shuffled block tables: Llama-3.1-8B heads (32 q / 8 KV,
// head_dim 128), cached prefixes plus chunks, ragged batches, sliding windows, contexts of a few
// thousand tokens, and the small head sizes of the tiny test models. Prefill runs both whole
// and, given a workspace, split over the keys (short chunks over long contexts, where the plan
// splits; elsewhere the same call must give the same result unsplit).
//
// Tolerance: the output is a convex combination of V rows (|v| <= 1 here) computed in float32 and
// rounded once to the format: bf16 atol 4e-3 + rtol 2^-7, fp16 atol 5e-4 + rtol 2^-10. The
// tensor-core prefill also rounds the probabilities to the format before P V (as FlashAttention
// does): bf16 atol 1.2e-2, fp16 atol 1.5e-3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "kernels/ops/attention.h"
#include "kernels/ops/gpu/attention_gpu.h"
#include "tests/kernels/ops_gpu_test_util.h"

namespace kvtier::ops_gpu_test {
namespace {

struct Case {
  int64_t q_heads = 32;
  int64_t kv_heads = 8;
  int64_t head_dim = 128;
  int64_t block_tokens = 16;
  int64_t window = 0;
  std::vector<int32_t> kv_lens;  // per sequence
  std::vector<int32_t> q_lens;   // per sequence (prefill); decode: 1 each
};

Tolerance AttentionTolerance(DType t) {
  return t == DType::kBf16 ? Tolerance{4e-3, 1.0 / 128} : Tolerance{5e-4, 1.0 / 1024};
}

// Worst case of rounding each probability (|v| <= 1): one unit roundoff of the format on top.
Tolerance MmaPrefillTolerance(DType t) {
  return t == DType::kBf16 ? Tolerance{1.2e-2, 1.0 / 128} : Tolerance{1.5e-3, 1.0 / 1024};
}

// The pool, block tables and queries of a case, on the host (rounded) and on the device.
struct Setup {
  ops::AttentionParams params;
  int64_t max_blocks = 0;
  std::vector<float> pool;
  std::vector<int32_t> tables;
  std::vector<float> q;
  std::vector<int32_t> q_indptr{0};
  DeviceBuffer pool_dev, tables_dev, q_dev, kv_lens_dev, indptr_dev;
};

void Build(DType dtype, const Case& c, Setup& s) {
  const int64_t batch = static_cast<int64_t>(c.kv_lens.size());
  s.params.kv = {
      .layers = 2, .block_tokens = c.block_tokens, .kv_heads = c.kv_heads, .head_dim = c.head_dim};
  s.params.layer = 1;
  s.params.q_heads = c.q_heads;
  s.params.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  s.params.sliding_window = c.window;
  const int32_t longest = *std::max_element(c.kv_lens.begin(), c.kv_lens.end());
  s.max_blocks = (longest + c.block_tokens - 1) / c.block_tokens;
  // Each sequence's own blocks on distinct slots, the rest of its table row on its first (never
  // read): a long sequence beside short ones costs no pool for them.
  std::vector<int64_t> own(batch);
  int64_t used = 0;
  for (int64_t b = 0; b < batch; ++b) {
    own[b] = (c.kv_lens[b] + c.block_tokens - 1) / c.block_tokens;
    used += own[b];
  }
  const int64_t slots = used + 3;
  std::vector<int32_t> order(slots);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(21));
  s.tables.assign(batch * s.max_blocks, 0);
  for (int64_t b = 0, next = 0; b < batch; next += own[b], ++b) {
    for (int64_t i = 0; i < s.max_blocks; ++i) {
      s.tables[b * s.max_blocks + i] = order[next + (i < own[b] ? i : 0)];
    }
  }
  s.pool = Uniform(slots * s.params.kv.slot_elems(), -1, 1, 22);
  for (int32_t n : c.q_lens) s.q_indptr.push_back(s.q_indptr.back() + n);
  s.q = Uniform(static_cast<size_t>(s.q_indptr.back()) * c.q_heads * c.head_dim, -2, 2, 23);
  s.pool_dev = DeviceBuffer(Round16(dtype, s.pool));
  s.q_dev = DeviceBuffer(Round16(dtype, s.q));
  s.tables_dev = DeviceBuffer(s.tables);
  s.kv_lens_dev = DeviceBuffer(c.kv_lens);
  s.indptr_dev = DeviceBuffer(s.q_indptr);
}

ops::gpu::AttentionBatch Batch(const Setup& s, int64_t batch, DeviceBuffer& out) {
  ops::gpu::AttentionBatch b;
  b.q = s.q_dev.get();
  b.kv_lens = s.kv_lens_dev.as<int32_t>();
  b.block_tables = s.tables_dev.as<int32_t>();
  b.max_blocks = s.max_blocks;
  b.batch = batch;
  b.pool = s.pool_dev.get();
  b.out = out.get();
  return b;
}

// Every prefill kernel of this build against one reference result: the default (on an H100 at
// head_dim 128 a Hopper kernel, else mma.sync where the device has it), each kernel
// KVTIER_PREFILL_KERNEL picks (the Hopper variants of attention_prefill_wgmma.h and mma.sync; on
// other devices they fall back to the default), and the portable SIMT one the HIP build runs.
struct Kernel {
  const char* env;  // KVTIER_PREFILL_KERNEL, nullptr: unset
  const char* name;
  bool portable;
};
constexpr Kernel kKernels[] = {
    {nullptr, "default kernel", false},
    {"ws", "warp-specialised wgmma kernel, cp.async producer", false},
    {"wgmma-sync", "wgmma kernel, every thread loading", false},
    {"mma", "mma.sync kernel", false},
    {nullptr, "portable kernel", true},
};

// Sets KVTIER_PREFILL_KERNEL for its lifetime (the launcher reads it at each call).
class PrefillKernelEnv {
 public:
  explicit PrefillKernelEnv(const Kernel& k) {
    if (k.env != nullptr) setenv("KVTIER_PREFILL_KERNEL", k.env, 1);
  }
  ~PrefillKernelEnv() { unsetenv("KVTIER_PREFILL_KERNEL"); }
};

int64_t MultiprocessorCount() {
  const absl::StatusOr<gpu::DeviceInfo> info = gpu::GetDeviceInfo(0);
  return info.ok() ? info->multiprocessors : 1;
}

// Whether the prefill of a case is split over the keys on this device, given the workspace the
// checks pass (the plan of attention_gpu.cc with the tensor-core kernels' 128-row tiles).
bool PrefillSplits(const Case& c, int64_t max_q, int64_t ws_bytes) {
  const int64_t batch = static_cast<int64_t>(c.kv_lens.size());
  const int64_t max_kv = *std::max_element(c.kv_lens.begin(), c.kv_lens.end());
  const int64_t span = c.window > 0 ? std::min(max_kv, c.window + max_q) : max_kv;
  const int64_t tiles = (max_q * (c.q_heads / c.kv_heads) + 127) / 128;
  const int64_t per_split = batch * max_q * c.q_heads * (c.head_dim + 1) * 4;
  return ops::gpu::PrefillSplits(tiles * c.kv_heads * batch, MultiprocessorCount(), span,
                                 ws_bytes / per_split) > 1;
}

// Each kernel, whole and (with a workspace) split over the keys, against the reference. A split
// is expected when `expect_split` (the test is about it): a check that it happened at all.
void CheckPrefill(DType dtype, const Case& c, bool expect_split = false) {
  Setup s;
  Build(dtype, c, s);
  const int64_t batch = static_cast<int64_t>(c.kv_lens.size());
  const int64_t rows = s.q_indptr.back();
  const size_t out_elems = static_cast<size_t>(rows) * c.q_heads * c.head_dim;
  std::vector<float> want(out_elems);
  ops::ref::AttentionPrefill(s.params, s.q.data(), s.q_indptr.data(), c.kv_lens.data(),
                             s.tables.data(), s.max_blocks, batch, s.pool.data(), want.data());
  const int64_t max_q = *std::max_element(c.q_lens.begin(), c.q_lens.end());
  const int64_t max_kv = *std::max_element(c.kv_lens.begin(), c.kv_lens.end());
  const int64_t ws_bytes = ops::gpu::AttentionPrefillWorkspaceBytes(s.params, batch * max_q);
  if (expect_split) {
    EXPECT_TRUE(PrefillSplits(c, max_q, ws_bytes)) << "no split planned";
  }
  DeviceBuffer workspace(ws_bytes);
  for (const Kernel& kernel : kKernels) {
    const Tolerance tol = kernel.portable ? AttentionTolerance(dtype) : MmaPrefillTolerance(dtype);
    const auto run =
        kernel.portable ? ops::gpu::AttentionPrefillPortable : ops::gpu::AttentionPrefill;
    for (const bool split : {false, true}) {
      DeviceBuffer out(out_elems * 2);
      const ops::gpu::PrefillSplitSpace space =
          split ? ops::gpu::PrefillSplitSpace{.max_kv_len = max_kv,
                                              .workspace = workspace.get(),
                                              .workspace_bytes = ws_bytes}
                : ops::gpu::PrefillSplitSpace{};
      {
        PrefillKernelEnv env(kernel);
        KVTIER_ASSERT_OK(run(dtype, s.params, Batch(s, batch, out), s.indptr_dev.as<int32_t>(),
                             max_q, nullptr, space));
      }
      EXPECT_TRUE(Near(Widen(dtype, out.Download<uint16_t>(out_elems)), want, tol.atol, tol.rtol))
          << kernel.name << (split ? ", split over the keys" : "");
    }
  }
}

void CheckDecode(DType dtype, Case c) {
  c.q_lens.assign(c.kv_lens.size(), 1);
  Setup s;
  Build(dtype, c, s);
  const int64_t batch = static_cast<int64_t>(c.kv_lens.size());
  const size_t out_elems = static_cast<size_t>(batch) * c.q_heads * c.head_dim;
  DeviceBuffer out(out_elems * 2);
  const int64_t ws_bytes = ops::gpu::AttentionDecodeWorkspaceBytes(s.params, batch);
  DeviceBuffer workspace(ws_bytes);
  const int64_t max_kv = *std::max_element(c.kv_lens.begin(), c.kv_lens.end());
  KVTIER_ASSERT_OK(ops::gpu::AttentionDecode(dtype, s.params, Batch(s, batch, out), max_kv,
                                             workspace.get(), ws_bytes, nullptr));
  std::vector<float> want(out_elems);
  ops::ref::AttentionDecode(s.params, s.q.data(), c.kv_lens.data(), s.tables.data(), s.max_blocks,
                            batch, s.pool.data(), want.data());
  const Tolerance tol = AttentionTolerance(dtype);
  EXPECT_TRUE(Near(Widen(dtype, out.Download<uint16_t>(out_elems)), want, tol.atol, tol.rtol));
}

class AttentionGpu : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { KVTIER_REQUIRE_GPU(); }
};

INSTANTIATE_TEST_SUITE_P(Formats, AttentionGpu, ::testing::Values(DType::kBf16, DType::kFp16),
                         [](const auto& p) { return ops::gpu::DTypeName(p.param); });

TEST_P(AttentionGpu, PrefillFromEmptyCache) {
  CheckPrefill(GetParam(), Case{.kv_lens = {300}, .q_lens = {300}});
}

// A 1,000-token cached prefix (blocks found in the daemon) and a 300-token chunk after it.
TEST_P(AttentionGpu, PrefillChunkAfterCachedPrefix) {
  CheckPrefill(GetParam(), Case{.kv_lens = {1300}, .q_lens = {300}});
}

// A few thousand tokens of context: 3,500 cached, 96 new.
TEST_P(AttentionGpu, PrefillLongContext) {
  CheckPrefill(GetParam(), Case{.kv_lens = {3596}, .q_lens = {96}});
}

// Many tiles of keys and query blocks: 900 new tokens after a 100-token prefix (not a multiple of
// any kernel's tile), so blocks run through up to eight 128-key tiles, masked and whole.
TEST_P(AttentionGpu, PrefillManyTiles) {
  CheckPrefill(GetParam(), Case{.kv_lens = {1000}, .q_lens = {900}});
}

// Blocks of 12 tokens: not a power of two, so the kernels' general block-table arithmetic runs.
TEST_P(AttentionGpu, PrefillBlocksNotPowerOfTwo) {
  CheckPrefill(GetParam(), Case{.block_tokens = 12, .kv_lens = {400, 130}, .q_lens = {300, 130}});
}

// Whole tiles only (kv_len a multiple of 128: no tile runs past the end), and blocks of 8 and 32
// tokens: the Hopper kernel's tensor copies take one box per pool block, of the block's size.
TEST_P(AttentionGpu, PrefillWholeTilesOtherBlockSizes) {
  CheckPrefill(GetParam(), Case{.kv_lens = {1024}, .q_lens = {1024}});
  CheckPrefill(GetParam(), Case{.block_tokens = 8, .kv_lens = {640, 300}, .q_lens = {512, 300}});
  CheckPrefill(GetParam(), Case{.block_tokens = 32, .kv_lens = {768, 300}, .q_lens = {640, 300}});
}

// Ragged: a fresh prompt, one token after a long prefix, a chunk after a short prefix; block
// boundaries not aligned to the kernel's tiles.
TEST_P(AttentionGpu, PrefillRaggedBatch) {
  CheckPrefill(GetParam(), Case{.kv_lens = {77, 514, 240}, .q_lens = {77, 1, 200}});
}

TEST_P(AttentionGpu, PrefillSlidingWindow) {
  CheckPrefill(GetParam(), Case{.window = 100, .kv_lens = {700, 64}, .q_lens = {250, 64}});
}

// Qwen2.5-7B's group of 7 (28 q heads over 4 KV heads), head_dim 64 and the tiny models' 16 / 32.
TEST_P(AttentionGpu, PrefillOtherHeadShapes) {
  CheckPrefill(GetParam(), Case{.q_heads = 28,
                                .kv_heads = 4,
                                .head_dim = 64,
                                .block_tokens = 8,
                                .kv_lens = {150, 33},
                                .q_lens = {50, 33}});
  CheckPrefill(GetParam(), Case{.q_heads = 4,
                                .kv_heads = 2,
                                .head_dim = 16,
                                .block_tokens = 4,
                                .kv_lens = {45, 9},
                                .q_lens = {45, 3}});
  CheckPrefill(GetParam(), Case{.q_heads = 4,
                                .kv_heads = 2,
                                .head_dim = 32,
                                .window = 7,
                                .kv_lens = {40},
                                .q_lens = {40}});
}

// Short chunks after long cached prefixes: too few query tiles to fill the device, so the keys
// are split across thread blocks and merged. One token to 64, contexts of 1K to 16K.
TEST_P(AttentionGpu, PrefillSplitShortChunkLongContext) {
  CheckPrefill(GetParam(), Case{.kv_lens = {8192}, .q_lens = {16}}, true);
  CheckPrefill(GetParam(), Case{.kv_lens = {16384}, .q_lens = {64}}, true);
  CheckPrefill(GetParam(), Case{.kv_lens = {1024}, .q_lens = {1}}, true);
  CheckPrefill(GetParam(), Case{.kv_lens = {4001}, .q_lens = {33}}, true);
}

// Long and short sequences in one batch: the short ones have fewer key tiles than splits, so some
// of their blocks compute nothing (their partial results count nothing in the merge).
TEST_P(AttentionGpu, PrefillSplitMixedBatch) {
  CheckPrefill(GetParam(), Case{.kv_lens = {12000, 40, 2048, 300}, .q_lens = {16, 40, 1, 7}}, true);
}

// A sliding window over a long context: rows see different key ranges, and splits outside a
// row's window see none of it.
TEST_P(AttentionGpu, PrefillSplitSlidingWindow) {
  CheckPrefill(GetParam(), Case{.window = 1000, .kv_lens = {6000, 900}, .q_lens = {48, 20}}, true);
  CheckPrefill(GetParam(), Case{.window = 4096, .kv_lens = {8192}, .q_lens = {64}}, true);
}

// Other head shapes split too: a group of 7 at head_dim 64, and the tiny models' head_dim 32.
TEST_P(AttentionGpu, PrefillSplitOtherHeadShapes) {
  CheckPrefill(GetParam(),
               Case{.q_heads = 28,
                    .kv_heads = 4,
                    .head_dim = 64,
                    .block_tokens = 8,
                    .kv_lens = {3000, 500},
                    .q_lens = {20, 3}},
               true);
  CheckPrefill(GetParam(),
               Case{.q_heads = 4, .kv_heads = 2, .head_dim = 32, .kv_lens = {2000}, .q_lens = {5}},
               true);
}

// Lengths from one token to a few thousand in one batch (so some sequences are split, others not).
TEST_P(AttentionGpu, DecodeMixedLengths) {
  CheckDecode(GetParam(), Case{.kv_lens = {1, 17, 1000, 4000}, .q_lens = {}});
}

// Batch 1 at 4K: split over the sequence into many pieces, then combined.
TEST_P(AttentionGpu, DecodeSplitLongContext) {
  CheckDecode(GetParam(), Case{.kv_lens = {4097}, .q_lens = {}});
}

TEST_P(AttentionGpu, DecodeSlidingWindow) {
  CheckDecode(GetParam(), Case{.window = 256, .kv_lens = {3000, 100, 257}, .q_lens = {}});
}

TEST_P(AttentionGpu, DecodeOtherHeadShapes) {
  CheckDecode(GetParam(), Case{.q_heads = 28,
                               .kv_heads = 4,
                               .head_dim = 64,
                               .block_tokens = 8,
                               .kv_lens = {150, 2000},
                               .q_lens = {}});
  CheckDecode(GetParam(),
              Case{.q_heads = 64, .kv_heads = 8, .kv_lens = {513}, .q_lens = {}});  // group of 8
  CheckDecode(GetParam(), Case{.q_heads = 4,
                               .kv_heads = 2,
                               .head_dim = 16,
                               .block_tokens = 4,
                               .kv_lens = {45, 9},
                               .q_lens = {}});
  CheckDecode(
      GetParam(),
      Case{
          .q_heads = 4, .kv_heads = 2, .head_dim = 32, .window = 7, .kv_lens = {40}, .q_lens = {}});
}

// The split plan (host side, no GPU): splits only when the blocks fill under half the
// multiprocessors, keeps blocks x splits within them, and is bounded by the keys, the workspace
// and kMaxPrefillSplits.
TEST(PrefillSplitPlan, SplitsOnlyShortChunksOverLongContexts) {
  // 16 tokens x group 4 = one tile per KV head: 8 blocks on 132 multiprocessors, 8K keys.
  EXPECT_EQ(ops::gpu::PrefillSplits(8, 132, 8192, 1000), 16);
  EXPECT_EQ(ops::gpu::PrefillSplits(8, 132, 1024, 1000), 1024 / ops::gpu::kMinKeysPerPrefillSplit);
  EXPECT_EQ(ops::gpu::PrefillSplits(8, 132, 8192, 5), 5);  // what the workspace holds
  EXPECT_EQ(ops::gpu::PrefillSplits(8, 132, 8192, 0), 1);  // no workspace
  EXPECT_EQ(ops::gpu::PrefillSplits(1, 132, 1 << 20, 1000), ops::gpu::kMaxPrefillSplits);
  EXPECT_EQ(ops::gpu::PrefillSplits(66, 132, 1 << 20, 1000), 2);
  EXPECT_EQ(ops::gpu::PrefillSplits(67, 132, 1 << 20, 1000), 1);  // over half already busy
  EXPECT_EQ(ops::gpu::PrefillSplits(8, 132, 300, 1000), 1);       // too few keys to split
  for (int64_t blocks = 1; blocks <= 66; ++blocks) {
    EXPECT_LE(blocks * ops::gpu::PrefillSplits(blocks, 132, 1 << 20, 1000), 132) << blocks;
  }
}

TEST(AttentionGpuArguments, UnsupportedShapesAreInvalidArgument) {
  KVTIER_REQUIRE_GPU();
  DeviceBuffer buf(1 << 16);
  ops::AttentionParams p;
  p.kv = {.layers = 1, .block_tokens = 16, .kv_heads = 2, .head_dim = 96};
  p.q_heads = 4;
  ops::gpu::AttentionBatch b;
  b.q = b.pool = b.out = buf.get();
  b.kv_lens = b.block_tables = buf.as<int32_t>();
  b.max_blocks = b.batch = 1;
  absl::Status s = ops::gpu::AttentionPrefill(DType::kBf16, p, b, buf.as<int32_t>(), 1, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("head_dim 96"), std::string::npos) << s;
  p.kv.head_dim = 128;
  p.q_heads = 2 * 16;  // a group of 16: more than decode holds
  s = ops::gpu::AttentionDecode(DType::kBf16, p, b, 1, buf.get(), 1 << 16, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace kvtier::ops_gpu_test
