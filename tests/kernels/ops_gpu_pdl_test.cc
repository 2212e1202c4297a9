// Programmatic dependent launch (kernels/ops/gpu/pdl.h): a kernel launched that way starts before
// the one ahead of it has finished and must wait on the device before it reads that kernel's
// output. A chain of decode-step kernels where each reads what the one before wrote — Gemv,
// FusedAddRmsNorm, GemvSiluMul, RopeAndWriteKv, AttentionDecode — must give the same bits with PDL
// on as with it off (SetProgrammaticLaunch), launched one by one and replayed from a graph. A
// kernel that skipped its wait would read the buffer's previous contents, which differ (each
// buffer is rewritten every round), and the bits would too.
//
// No tolerance: every kernel is deterministic (fixed reduction order), so the two runs are equal.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ops/gpu/attention_gpu.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "kernels/ops/gpu/graph.h"
#include "tests/kernels/ops_gpu_test_util.h"

namespace kvtier::ops_gpu_test {
namespace {

constexpr int64_t kHidden = 1024, kInter = 2048, kHeads = 8, kRounds = 6, kContext = 300;
const ops::PagedKvGeometry kGeometry{
    .layers = 1, .block_tokens = 16, .kv_heads = 2, .head_dim = 128};
constexpr int64_t kQDim = kHeads * 128, kKvDim = 2 * 128, kQkv = kQDim + 2 * kKvDim;
constexpr int64_t kBlocks = (kContext + 15) / 16;

// Device state of the chain: a decode step of a one-layer model, kRounds times over.
struct Chain {
  DeviceBuffer h, residual, qkv, attn, gate_up, norm;
  DeviceBuffer w_qkv, w_o, w_gate_up, w_down;
  DeviceBuffer pool, table, kv_len, positions, slots, inv_freq, workspace;

  explicit Chain(DType t)
      : h(Bits(t, kHidden, 1)),
        residual(Bits(t, kHidden, 2)),
        qkv(kQkv * 2),
        attn(kQDim * 2),
        gate_up(2 * kInter * 2),
        norm(Bits(t, kHidden, 3, 0.5f, 1.5f)),
        w_qkv(Bits(t, kQkv * kHidden, 4, -0.05f, 0.05f)),
        w_o(Bits(t, kHidden * kQDim, 5, -0.05f, 0.05f)),
        w_gate_up(Bits(t, 2 * kInter * kHidden, 6, -0.05f, 0.05f)),
        w_down(Bits(t, kHidden * kInter, 7, -0.05f, 0.05f)),
        pool(Bits(t, kBlocks * kGeometry.slot_elems(), 8)),
        table(Table()),
        kv_len(std::vector<int32_t>{kContext}),
        positions(std::vector<int32_t>{kContext - 1}),
        slots(
            std::vector<int64_t>{int64_t{Table()[(kContext - 1) / 16]} * 16 + (kContext - 1) % 16}),
        inv_freq(Vec(64, 9, 1e-4f, 1.0f)),
        workspace(size_t{16} << 20) {}

  static std::vector<float> Vec(int64_t n, uint32_t seed, float lo = -1, float hi = 1) {
    return Uniform(static_cast<size_t>(n), lo, hi, seed);
  }
  static std::vector<uint16_t> Bits(DType t, int64_t n, uint32_t seed, float lo = -1,
                                    float hi = 1) {
    std::vector<float> v = Vec(n, seed, lo, hi);
    return Round16(t, v);
  }
  static std::vector<int32_t> Table() {
    std::vector<int32_t> t(kBlocks);
    for (int64_t b = 0; b < kBlocks; ++b) t[b] = static_cast<int32_t>((b * 7) % kBlocks);
    return t;
  }
};

absl::Status Enqueue(DType t, Chain& c, gpu::StreamHandle s) {
  namespace og = ops::gpu;
  for (int r = 0; r < kRounds; ++r) {
    KVTIER_RETURN_IF_ERROR(og::Gemv(
        t, {.x = c.h.get(), .w = c.w_qkv.get(), .m = 1, .n = kQkv, .k = kHidden, .y = c.qkv.get()},
        s));
    auto* qkv = c.qkv.as<uint16_t>();
    KVTIER_RETURN_IF_ERROR(og::RopeAndWriteKv(
        t, qkv, kQkv, kHeads, qkv + kQDim, qkv + kQDim + kKvDim, kQkv, c.positions.as<int32_t>(),
        c.inv_freq.as<float>(), c.slots.as<int64_t>(), 1, kGeometry, 0, c.pool.get(), s));
    const ops::AttentionParams params{
        .kv = kGeometry, .layer = 0, .q_heads = kHeads, .scale = 0.088f, .sliding_window = 0};
    const og::AttentionBatch batch{.q = qkv,
                                   .q_token_stride = kQkv,
                                   .kv_lens = c.kv_len.as<int32_t>(),
                                   .block_tables = c.table.as<int32_t>(),
                                   .max_blocks = kBlocks,
                                   .batch = 1,
                                   .pool = c.pool.get(),
                                   .out = c.attn.get()};
    // A long bound: the context is split, so the combine launch is in the chain too.
    KVTIER_RETURN_IF_ERROR(
        og::AttentionDecode(t, params, batch, 8192, c.workspace.get(), 16 << 20, s));
    KVTIER_RETURN_IF_ERROR(og::Gemv(
        t, {.x = c.attn.get(), .w = c.w_o.get(), .m = 1, .n = kHidden, .k = kQDim, .y = c.h.get()},
        s));
    KVTIER_RETURN_IF_ERROR(
        og::FusedAddRmsNorm(t, c.h.get(), c.residual.get(), c.norm.get(), 1, kHidden, 1e-5f, s));
    KVTIER_RETURN_IF_ERROR(og::Gemv(t,
                                    {.x = c.h.get(),
                                     .w = c.w_gate_up.get(),
                                     .m = 1,
                                     .n = 2 * kInter,
                                     .k = kHidden,
                                     .y = c.gate_up.get()},
                                    s));
    KVTIER_RETURN_IF_ERROR(og::GemvSiluMul(t,
                                           {.x = c.gate_up.get(),
                                            .w = c.w_down.get(),
                                            .m = 1,
                                            .n = kHidden,
                                            .k = kInter,
                                            .y = c.h.get()},
                                           s));
    KVTIER_RETURN_IF_ERROR(
        og::FusedAddRmsNorm(t, c.h.get(), c.residual.get(), c.norm.get(), 1, kHidden, 1e-5f, s));
  }
  return absl::OkStatus();
}

// The chain's final hidden state, residual and pool, as bits.
std::vector<uint16_t> RunChain(DType t, bool pdl, bool in_graph) {
  ops::gpu::SetProgrammaticLaunch(pdl);
  Chain c(t);
  absl::StatusOr<gpu::Stream> stream = gpu::Stream::Create();
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  if (in_graph) {
    absl::StatusOr<ops::gpu::Graph> graph =
        ops::gpu::Graph::Capture(stream->handle(), [&] { return Enqueue(t, c, stream->handle()); });
    EXPECT_TRUE(graph.ok()) << graph.status();
    if (graph.ok()) {
      EXPECT_TRUE(graph->Launch(stream->handle()).ok());
    }
  } else {
    EXPECT_TRUE(Enqueue(t, c, stream->handle()).ok());
  }
  EXPECT_TRUE(stream->Synchronize().ok());
  ops::gpu::SetProgrammaticLaunch(true);
  std::vector<uint16_t> bits = c.h.Download<uint16_t>(kHidden);
  const std::vector<uint16_t> res = c.residual.Download<uint16_t>(kHidden);
  const std::vector<uint16_t> pool = c.pool.Download<uint16_t>(kBlocks * kGeometry.slot_elems());
  bits.insert(bits.end(), res.begin(), res.end());
  bits.insert(bits.end(), pool.begin(), pool.end());
  return bits;
}

class PdlGpu : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { KVTIER_REQUIRE_GPU(); }
};

INSTANTIATE_TEST_SUITE_P(Formats, PdlGpu, ::testing::Values(DType::kBf16, DType::kFp16),
                         [](const auto& p) { return std::string(ops::gpu::DTypeName(p.param)); });

TEST_P(PdlGpu, DependentChainGivesTheSameBitsWithPdlOnAndOff) {
  const std::vector<uint16_t> off = RunChain(GetParam(), false, false);
  ASSERT_FALSE(off.empty());
  for (uint16_t b : off) {
    ASSERT_TRUE(std::isfinite(From16(GetParam(), b))) << "the chain must stay finite";
  }
  EXPECT_EQ(RunChain(GetParam(), true, false), off) << "launched one by one";
  EXPECT_EQ(RunChain(GetParam(), true, true), off) << "replayed from a graph";
}

}  // namespace
}  // namespace kvtier::ops_gpu_test
