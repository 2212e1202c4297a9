// The engine's attention kernels (kernels/ops/gpu/attention_gpu.h) at the Llama-3.1-8B shape (32
// query heads, 8 KV heads, head_dim 128, bf16, 16-token blocks of the paged pool), one layer per
// call, next to ceilings measured in the same run:
//
//   GEMM       cuBLASLt (GemmRunner) bf16 8192 x 8192 x 8192: the FLOP ceiling (tensor cores)
//   GEMM tiled our tiled kernel at the same shape (the HIP build's GEMM; float32 SIMT arithmetic)
//   HBM copy   a 1 GiB device-to-device copy, counted as bytes read + written
//
// Prefill: one sequence of N new tokens (no cached prefix), causal, 4 * q_heads * head_dim *
// N(N+1)/2 FLOPs, on the default kernel (on an H100 the Hopper kernel, else mma.sync where the
// device has it), on each kernel KVTIER_PREFILL_KERNEL can pick (the Hopper variants and mma.sync)
// and, at 8K, on the portable SIMT kernel the HIP build runs; the largest difference of each
// kernel's output from the default one's is printed under the table. Decode: batch B, one query
// each against N cached tokens: the K/V bytes read (2 * N * kv_heads * head_dim * 2 bytes per
// sequence) over the time. GPU event times, best of --repeat after a warm-up.
//
// Chunk over context: a short prefill chunk (Q tokens) after a long cached prefix (N tokens), as
// after a prefix hit — one call per layer of a 32-layer pool (each layer's K/V distinct memory, as
// in the engine), on the default kernel whole and split over the keys (attention_gpu.h); GB/s is
// the K/V bytes read (2 * N * kv_heads * head_dim * 2 per layer) over the time, next to the HBM
// copy row (its read rate is half the figure printed there).
//
//   kvtier_attention_bench [--repeat R] [--chunks]   (default 5; --chunks: only the copy and the
//                                                     chunk-over-context rows)
// Without a usable GPU it prints why and exits 0.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gpu_runtime.h"
#include "kernels/ops/gpu/attention_gpu.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "tests/bench/gpu_bench_util.h"

namespace kvtier {
namespace {

using ops::gpu::DType;

constexpr int64_t kQHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockTokens = 16;

constexpr char kProgram[] = "attention_bench";
void Check(const absl::Status& s, const char* what) { bench::Check(kProgram, s, what); }
template <typename T>
T Take(absl::StatusOr<T> v, const char* what) {
  return bench::Take(kProgram, std::move(v), what);
}

// Device allocations of one measurement, freed when it ends.
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    for (void* p : ptrs_) (void)gpu::DeviceFree(p);
  }
  void* Alloc(size_t bytes) { return ptrs_.emplace_back(Take(gpu::DeviceAlloc(bytes), "alloc")); }

 private:
  std::vector<void*> ptrs_;
};

// Device memory holding a repeating pattern of small bf16 values (|x| < 1).
void* Filled(Arena& arena, size_t bytes) {
  void* p = arena.Alloc(bytes);
  std::vector<uint16_t> host(std::min<size_t>(bytes / 2, size_t{1} << 22));
  for (size_t i = 0; i < host.size(); ++i) {
    const float f = static_cast<float>((i * 2654435761u >> 8) % 2001) / 1000.0f - 1.0f;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    host[i] = static_cast<uint16_t>(u >> 16);
  }
  for (size_t at = 0; at < bytes; at += host.size() * 2) {
    const size_t n = std::min(host.size() * 2, bytes - at);
    Check(gpu::CopyAsync(static_cast<char*>(p) + at, host.data(), n, nullptr), "fill");
  }
  Check(gpu::DeviceSynchronize(), "fill");
  return p;
}

double BestSeconds(int repeat, gpu::StreamHandle stream, const std::function<void()>& enqueue) {
  return bench::BestSeconds(kProgram, repeat, stream, enqueue);
}

struct Row {
  std::string what;
  double seconds;
  double tflops;  // < 0: not a FLOP figure
  double gbps;    // < 0: not a bandwidth figure
};

std::string Fig(double v, const char* fmt) {
  return v < 0 ? "" : fmt::format(fmt::runtime(fmt), v);
}

void Print(const std::vector<Row>& rows) {
  std::printf("| what | ms | TFLOP/s | GB/s |\n| --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    std::printf("| %s | %.3f | %s | %s |\n", r.what.c_str(), r.seconds * 1e3,
                Fig(r.tflops, "{:.1f}").c_str(), Fig(r.gbps, "{:.0f}").c_str());
  }
}

ops::AttentionParams Params() {
  ops::AttentionParams p;
  p.kv = {.layers = 1, .block_tokens = kBlockTokens, .kv_heads = kKvHeads, .head_dim = kHeadDim};
  p.q_heads = kQHeads;
  p.scale = 0.08838834764831845f;  // 1 / sqrt(128)
  return p;
}

// Block tables for `batch` sequences of `tokens` each, slots in order; uploaded.
int32_t* Tables(Arena& arena, int64_t batch, int64_t max_blocks) {
  std::vector<int32_t> t(batch * max_blocks);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(i);
  auto* d = static_cast<int32_t*>(arena.Alloc(t.size() * 4));
  Check(gpu::CopyAsync(d, t.data(), t.size() * 4, nullptr), "upload");
  return d;
}

int32_t* Upload(Arena& arena, const std::vector<int32_t>& v) {
  auto* d = static_cast<int32_t*>(arena.Alloc(v.size() * 4));
  Check(gpu::CopyAsync(d, v.data(), v.size() * 4, nullptr), "upload");
  return d;
}

// Which prefill kernel a row times: the default (on an H100 the Hopper kernel), one picked by
// KVTIER_PREFILL_KERNEL (`env`: mma.sync or a Hopper variant, attention_prefill_wgmma.h), or the
// portable SIMT kernel.
struct Kernel {
  const char* env;  // nullptr: unset
  const char* label;
  bool portable;
  bool IsDefault() const { return env == nullptr && !portable; }
};
constexpr Kernel kDefault{nullptr, "", false};
constexpr Kernel kPortable{nullptr, " (portable SIMT)", true};
// Every other kernel timed at each length.
constexpr Kernel kOthers[] = {
    {"ws", " (wgmma warp-specialised, cp.async producer)", false},
    {"wgmma-sync", " (wgmma, every thread loads)", false},
    {"mma", " (mma.sync)", false},
};

// Outputs of the default kernel, by prompt length, to compare the others with.
std::vector<std::pair<int64_t, std::vector<uint16_t>>> g_default_out;
std::vector<std::string> g_diffs;

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Keeps the default kernel's output of n tokens, or prints how far another kernel's is from it.
void Compare(int64_t n, const Kernel& k, const void* out, size_t elems) {
  std::vector<uint16_t> host(elems);
  Check(gpu::CopyAsync(host.data(), out, elems * 2, nullptr), "download");
  Check(gpu::DeviceSynchronize(), "download");
  if (k.IsDefault()) {
    g_default_out.emplace_back(n, std::move(host));
    return;
  }
  for (const auto& [len, want] : g_default_out) {
    if (len != n) continue;
    double worst = 0;
    for (size_t i = 0; i < elems; ++i) {
      worst = std::max(worst,
                       static_cast<double>(std::abs(Bf16ToFloat(host[i]) - Bf16ToFloat(want[i]))));
    }
    g_diffs.push_back(
        fmt::format("largest difference from the default kernel's output{}, {} tokens: {:.4g}",
                    k.label, n, worst));
  }
}

Row Prefill(int64_t n, const Kernel& kernel, int repeat, gpu::StreamHandle stream) {
  const bool portable = kernel.portable;
  if (kernel.env != nullptr) {
    setenv("KVTIER_PREFILL_KERNEL", kernel.env, 1);
  } else {
    unsetenv("KVTIER_PREFILL_KERNEL");
  }
  Arena arena;
  const ops::AttentionParams p = Params();
  const int64_t blocks = (n + kBlockTokens - 1) / kBlockTokens;
  ops::gpu::AttentionBatch b;
  b.q = Filled(arena, n * kQHeads * kHeadDim * 2);
  b.out = arena.Alloc(n * kQHeads * kHeadDim * 2);
  b.pool = Filled(arena, blocks * p.kv.slot_elems() * 2);
  b.kv_lens = Upload(arena, {static_cast<int32_t>(n)});
  b.block_tables = Tables(arena, 1, blocks);
  b.max_blocks = blocks;
  b.batch = 1;
  const int32_t* indptr = Upload(arena, {0, static_cast<int32_t>(n)});
  const auto run = portable ? ops::gpu::AttentionPrefillPortable : ops::gpu::AttentionPrefill;
  const double s = BestSeconds(
      repeat, stream, [&] { Check(run(DType::kBf16, p, b, indptr, n, stream, {}), "prefill"); });
  unsetenv("KVTIER_PREFILL_KERNEL");
  Compare(n, kernel, b.out, n * kQHeads * kHeadDim);
  const double flops = 4.0 * kQHeads * kHeadDim * (static_cast<double>(n) * (n + 1) / 2);
  return {fmt::format("attention prefill{}, {} tokens", kernel.label, n), s, flops / s / 1e12, -1};
}

Row Decode(int64_t batch, int64_t n, int repeat, gpu::StreamHandle stream) {
  Arena arena;
  const ops::AttentionParams p = Params();
  const int64_t blocks = (n + kBlockTokens - 1) / kBlockTokens;
  ops::gpu::AttentionBatch b;
  b.q = Filled(arena, batch * kQHeads * kHeadDim * 2);
  b.out = arena.Alloc(batch * kQHeads * kHeadDim * 2);
  b.pool = Filled(arena, batch * blocks * p.kv.slot_elems() * 2);
  b.kv_lens = Upload(arena, std::vector<int32_t>(batch, static_cast<int32_t>(n)));
  b.block_tables = Tables(arena, batch, blocks);
  b.max_blocks = blocks;
  b.batch = batch;
  const int64_t ws_bytes = ops::gpu::AttentionDecodeWorkspaceBytes(p, batch);
  void* ws = arena.Alloc(ws_bytes);
  constexpr int kCalls = 20;  // back to back, as the layers of a step run
  const double s =
      BestSeconds(repeat, stream,
                  [&] {
                    for (int i = 0; i < kCalls; ++i) {
                      Check(ops::gpu::AttentionDecode(DType::kBf16, p, b, n, ws, ws_bytes, stream),
                            "decode");
                    }
                  }) /
      kCalls;
  const double bytes = static_cast<double>(batch) * n * 2 * kKvHeads * kHeadDim * 2;
  return {fmt::format("attention decode, batch {}, {} tokens", batch, n), s, -1, bytes / s / 1e9};
}

// Q new tokens after N - Q cached ones, kLayers calls (one per layer); split over the keys or not.
// `out`: the last layer's output (host copy), to compare the two.
Row ChunkOverContext(int64_t q, int64_t n, bool split, int repeat, gpu::StreamHandle stream,
                     std::vector<uint16_t>& out) {
  constexpr int64_t kLayers = 32;
  Arena arena;
  ops::AttentionParams p = Params();
  p.kv.layers = kLayers;
  const int64_t blocks = (n + kBlockTokens - 1) / kBlockTokens;
  ops::gpu::AttentionBatch b;
  b.q = Filled(arena, q * kQHeads * kHeadDim * 2);
  b.out = arena.Alloc(q * kQHeads * kHeadDim * 2);
  b.pool = Filled(arena, blocks * p.kv.slot_elems() * 2);
  b.kv_lens = Upload(arena, {static_cast<int32_t>(n)});
  b.block_tables = Tables(arena, 1, blocks);
  b.max_blocks = blocks;
  b.batch = 1;
  const int32_t* indptr = Upload(arena, {0, static_cast<int32_t>(q)});
  ops::gpu::PrefillSplitSpace space;
  if (split) {
    space.max_kv_len = n;
    space.workspace_bytes = ops::gpu::AttentionPrefillWorkspaceBytes(p, q);
    space.workspace = arena.Alloc(space.workspace_bytes);
  }
  const double s = BestSeconds(repeat, stream, [&] {
    for (int64_t l = 0; l < kLayers; ++l) {
      p.layer = l;
      Check(ops::gpu::AttentionPrefill(DType::kBf16, p, b, indptr, q, stream, space), "chunk");
    }
  });
  out.resize(q * kQHeads * kHeadDim);
  Check(gpu::CopyAsync(out.data(), b.out, out.size() * 2, nullptr), "download");
  Check(gpu::DeviceSynchronize(), "download");
  const double bytes = static_cast<double>(kLayers) * n * 2 * kKvHeads * kHeadDim * 2;
  return {fmt::format("prefill chunk of {} over {} tokens, {} layers, {}", q, n, kLayers,
                      split ? "split over the keys" : "whole"),
          s, -1, bytes / s / 1e9};
}

Row Gemm(bool tiled, int repeat, gpu::StreamHandle stream) {
  Arena arena;
  constexpr int64_t kN = 8192;
  ops::gpu::GemmArgs a;
  a.x = Filled(arena, kN * kN * 2);
  a.w = Filled(arena, kN * kN * 2);
  a.y = arena.Alloc(kN * kN * 2);
  a.m = a.n = a.k = kN;
  auto runner = Take(ops::gpu::GemmRunner::Create(), "gemm runner");
  const double s = BestSeconds(tiled ? 1 : repeat, stream, [&] {
    Check(
        tiled ? ops::gpu::GemmTiled(DType::kBf16, a, stream) : runner->Run(DType::kBf16, a, stream),
        "gemm");
  });
  const std::string name = tiled ? "GEMM tiled (ours)" : fmt::format("GEMM {}", runner->Backend());
  return {name + " bf16 8192^3", s, 2.0 * kN * kN * kN / s / 1e12, -1};
}

Row Copy(int repeat, gpu::StreamHandle stream) {
  Arena arena;
  constexpr size_t kBytes = size_t{1} << 30;
  void* src = Filled(arena, kBytes);
  void* dst = arena.Alloc(kBytes);
  const double s =
      BestSeconds(repeat, stream, [&] { Check(gpu::CopyAsync(dst, src, kBytes, stream), "copy"); });
  return {"HBM copy 1 GiB (read + written)", s, -1, 2.0 * kBytes / s / 1e9};
}

void ChunkRows(int repeat, gpu::StreamHandle h, std::vector<Row>& rows) {
  for (const auto& [q, n] : {std::pair<int64_t, int64_t>{16, 8192}, {64, 16384}, {1, 4096}}) {
    std::vector<uint16_t> whole, split;
    rows.push_back(ChunkOverContext(q, n, false, repeat, h, whole));
    rows.push_back(ChunkOverContext(q, n, true, repeat, h, split));
    double worst = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      worst = std::max(
          worst, static_cast<double>(std::abs(Bf16ToFloat(whole[i]) - Bf16ToFloat(split[i]))));
    }
    g_diffs.push_back(fmt::format(
        "largest difference of the split output from the whole one, chunk of {} over {}: {:.4g}", q,
        n, worst));
  }
}

int Run(int repeat, bool chunks_only) {
  Check(gpu::SetDevice(0), "device");
  gpu::Stream stream = Take(gpu::Stream::Create(), "stream");
  const gpu::StreamHandle h = stream.handle();
  std::vector<Row> rows;
  if (chunks_only) {
    rows.push_back(Copy(repeat, h));
    ChunkRows(repeat, h, rows);
    Print(rows);
    for (const std::string& d : g_diffs) std::printf("%s\n", d.c_str());
    return 0;
  }
  rows.push_back(Gemm(false, repeat, h));
  rows.push_back(Gemm(true, repeat, h));
  rows.push_back(Copy(repeat, h));
  for (int64_t n : {1024, 8192, 32768}) rows.push_back(Prefill(n, kDefault, repeat, h));
  for (const Kernel& k : kOthers) {
    for (int64_t n : {1024, 8192, 32768}) rows.push_back(Prefill(n, k, repeat, h));
  }
  rows.push_back(Prefill(8192, kPortable, repeat, h));
  for (int64_t n : {1024, 8192, 32768}) rows.push_back(Decode(1, n, repeat, h));
  rows.push_back(Decode(8, 8192, repeat, h));
  ChunkRows(repeat, h, rows);
  Print(rows);
  for (const std::string& d : g_diffs) std::printf("%s\n", d.c_str());
  return 0;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  int repeat = 5;
  bool chunks_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else if (arg == "--chunks") {
      chunks_only = true;
    } else {
      std::fprintf(stderr, "usage: kvtier_attention_bench [--repeat R] [--chunks]\n");
      return 2;
    }
  }
  const std::string why = kvtier::gpu::UnavailableReason();
  if (!why.empty()) {
    std::printf("attention_bench: no GPU (%s)\n", why.c_str());
    return 0;
  }
  return kvtier::Run(repeat < 1 ? 1 : repeat, chunks_only);
}
