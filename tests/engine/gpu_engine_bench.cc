// The GPU backend end to end at a real model's shape (docs/benchmarks.md, "Engine: the GPU
// backend"), next to ceilings measured in the same run:
//
//   GEMM      cuBLASLt bf16 8192 x 8192 x 8192 (TFLOP/s): what prefill's linear layers can reach
//   HBM copy  a 1 GiB device-to-device copy, bytes read + written (GB/s)
//
// TTFT: a prompt of N random token ids prefilled (in chunks of --chunk) and the first token chosen
// (greedy, on the GPU), host to host; best of 3 after a warm-up. Decode: ms per token at batch 1
// after a prompt of C tokens, over --decode-steps greedy steps, each step host to host (the token
// comes back before the next is enqueued), on each decode path: Gemv or cuBLASLt, graphs or
// kernel-by-kernel launches. Its roofline is the bytes a step must read — every weight but the
// embedding table, of which it reads one row — over the copy rate (the definition).
//
// Batched decode (--decode-batches, gpu_engine_batch_bench.h): the engine loop (LlmEngine over
// GpuBackend, continuous batching as `kvtier serve` runs it) with that many requests at once, each
// a --batch-prompt-token prompt and --batch-new-tokens greedy tokens: tokens/s and ms per decode
// step, batch graphs on and off, next to the ceiling batch / roofline step time.
//
// --golden FILE (written by tests/engine/hf_8b_golden.py from the same model directory): the last
// position's logits and the 32-step greedy continuation of its prompt, next to transformers' bf16
// and float32 runs of the same weights.
//
//   kvtier_engine_bench --model DIR [--prefill 1024,8192,32768] [--decode-contexts 32,8192]
//                       [--decode-steps 128] [--chunk 8192] [--golden FILE]
//                       [--decode-batches 1,16,64,256] [--batch-prompt-tokens 32]
//                       [--batch-new-tokens 128]
// (an empty list, e.g. --prefill "", skips that part)
// Without a usable GPU it prints why and exits 0.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/gpu_model.h"
#include "engine/gpu_sampler.h"
#include "engine/gpu_sequence.h"
#include "kernels/gpu_runtime.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "tests/bench/gpu_bench_util.h"
#include "tests/engine/gpu_engine_batch_bench.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;
using engine::GpuKvPool;
using engine::GpuModel;
using engine::GpuSequence;

constexpr char kProgram[] = "engine_bench";
void Check(const absl::Status& s, const char* what) { bench::Check(kProgram, s, what); }
template <typename T>
T Take(absl::StatusOr<T> v, const char* what) {
  return bench::Take(kProgram, std::move(v), what);
}

struct Flags {
  std::string model;
  std::vector<int64_t> prefill = {1024, 8192, 32768};
  std::vector<int64_t> decode_contexts = {32, 8192};
  int decode_steps = 128;
  int64_t chunk = 8192;
  std::string golden;
  engine_bench::BatchDecodeFlags batch;
};

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at < s.size()) {
    const size_t comma = s.find(',', at);
    out.push_back(std::stoll(s.substr(at, comma == std::string::npos ? comma : comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model")
      f.model = v;
    else if (k == "--prefill")
      f.prefill = ParseList(v);
    else if (k == "--decode-contexts")
      f.decode_contexts = ParseList(v);
    else if (k == "--decode-steps")
      f.decode_steps = std::stoi(v);
    else if (k == "--chunk")
      f.chunk = std::stoll(v);
    else if (k == "--golden")
      f.golden = v;
    else if (k == "--decode-batches")
      f.batch.batches = ParseList(v);
    else if (k == "--batch-prompt-tokens")
      f.batch.prompt_tokens = std::stoll(v);
    else if (k == "--batch-new-tokens")
      f.batch.new_tokens = std::stoi(v);
    else
      bench::Die(kProgram, "unknown flag " + k);
  }
  if (f.model.empty()) bench::Die(kProgram, "--model DIR is required");
  return f;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Ceilings {
  double gemm_tflops = 0;
  double copy_gbps = 0;
};

Ceilings MeasureCeilings(gpu::StreamHandle stream) {
  Ceilings c;
  constexpr int64_t kN = 8192;
  const size_t bytes = size_t{kN} * kN * 2;
  void* a = Take(gpu::DeviceAlloc(bytes), "alloc");
  void* b = Take(gpu::DeviceAlloc(bytes), "alloc");
  void* y = Take(gpu::DeviceAlloc(bytes), "alloc");
  Check(gpu::MemsetAsync(a, 0x3c, bytes, stream), "fill");
  Check(gpu::MemsetAsync(b, 0x3c, bytes, stream), "fill");
  auto runner = Take(ops::gpu::GemmRunner::Create(), "gemm runner");
  const ops::gpu::GemmArgs args{.x = a, .w = b, .m = kN, .n = kN, .k = kN, .y = y};
  const double s = bench::BestSeconds(kProgram, 10, stream, [&] {
    Check(runner->Run(ops::gpu::DType::kBf16, args, stream), "gemm");
  });
  c.gemm_tflops = 2.0 * kN * kN * kN / s / 1e12;
  for (void* p : {a, b, y}) Check(gpu::DeviceFree(p), "free");
  const size_t copy = size_t{1} << 30;
  void* from = Take(gpu::DeviceAlloc(copy), "alloc");
  void* to = Take(gpu::DeviceAlloc(copy), "alloc");
  const double cs = bench::BestSeconds(
      kProgram, 10, stream, [&] { Check(gpu::CopyAsync(to, from, copy, stream), "copy"); });
  c.copy_gbps = 2.0 * static_cast<double>(copy) / cs / 1e9;
  for (void* p : {from, to}) Check(gpu::DeviceFree(p), "free");
  return c;
}

// Prefill of `prompt` and the first token, host to host.
double TtftMs(GpuModel& model, GpuKvPool& pool, engine::GpuSampler& sampler,
              const std::vector<int32_t>& prompt) {
  const Clock::time_point t0 = Clock::now();
  GpuSequence seq(model, pool);
  const float* logits = Take(seq.Append(prompt, false), "prefill");
  Take(sampler.Choose(logits, {}, 0, model.stream()), "first token");
  return Ms(Clock::now() - t0);
}

void Prefill(const Flags& f, GpuModel& model, GpuKvPool& pool, engine::GpuSampler& sampler,
             const Ceilings& c, double params) {
  for (int64_t n : f.prefill) {
    const std::vector<int32_t> prompt = bench::RandomIds(n, model.config().vocab_size, 1);
    double best = 1e30;
    for (int r = 0; r < 4; ++r) {  // the first is a warm-up
      const double ms = TtftMs(model, pool, sampler, prompt);
      if (r > 0) best = std::min(best, ms);
    }
    const double tflops = 2.0 * params * static_cast<double>(n) / (best / 1e3) / 1e12;
    std::printf(
        "{\"what\": \"prefill\", \"engine\": \"kvtier-gpu\", \"prompt_tokens\": %lld, "
        "\"ttft_ms\": %.2f, \"tflops\": %.1f, \"gemm_ceiling_tflops\": %.1f}\n",
        static_cast<long long>(n), best, tflops, c.gemm_tflops);
    std::fflush(stdout);
  }
}

// ms per decode step after a prompt of `context` tokens; an error instead of dying, so that one
// path failing (e.g. a library call that a graph cannot record) leaves the others measured.
absl::StatusOr<double> DecodeMs(const Flags& f, GpuModel& model, GpuKvPool& pool,
                                engine::GpuSampler& sampler, int64_t context) {
  GpuSequence seq(model, pool);
  KVTIER_ASSIGN_OR_RETURN(
      const float* logits,
      seq.Append(bench::RandomIds(context, model.config().vocab_size, 2), /*all_logits=*/false));
  KVTIER_ASSIGN_OR_RETURN(int32_t token, sampler.Choose(logits, {}, 0, model.stream()));
  Clock::time_point t0 = Clock::now();
  for (int i = -3; i < f.decode_steps; ++i) {  // 3 warm-up steps (they record the graph)
    if (i == 0) t0 = Clock::now();
    KVTIER_ASSIGN_OR_RETURN(logits, seq.Append({&token, 1}, false));
    KVTIER_ASSIGN_OR_RETURN(token, sampler.Choose(logits, {}, 0, model.stream()));
  }
  return Ms(Clock::now() - t0) / f.decode_steps;
}

// The GPU's own time per decode step: steps enqueued back to back (the same token each time, no
// token brought back), timed by events — what the host's round trip per token adds is the
// difference from DecodeMs.
absl::StatusOr<double> DecodeGpuOnlyMs(const Flags& f, GpuModel& model, GpuKvPool& pool,
                                       int64_t context) {
  GpuSequence seq(model, pool);
  KVTIER_RETURN_IF_ERROR(
      seq.Append(bench::RandomIds(context, model.config().vocab_size, 2), false).status());
  const int32_t token = 7;
  KVTIER_RETURN_IF_ERROR(seq.Append({&token, 1}, false).status());  // records the graph
  KVTIER_ASSIGN_OR_RETURN(gpu::Event start, gpu::Event::Create(true));
  KVTIER_ASSIGN_OR_RETURN(gpu::Event end, gpu::Event::Create(true));
  KVTIER_RETURN_IF_ERROR(start.Record(model.stream()));
  for (int i = 0; i < f.decode_steps; ++i) {
    KVTIER_RETURN_IF_ERROR(seq.Append({&token, 1}, false).status());
  }
  KVTIER_RETURN_IF_ERROR(end.Record(model.stream()));
  KVTIER_RETURN_IF_ERROR(end.Synchronize());
  KVTIER_ASSIGN_OR_RETURN(const float ms, gpu::Event::ElapsedMs(start, end));
  return ms / f.decode_steps;
}

// Where a pass's time goes: `run` enqueues `passes` passes kernel by kernel with an event recorded
// after each operator (GpuModel::SetOpHook); each interval between consecutive events is charged
// to the operator that ends it, so a launch gap counts with the kernel after it ("embed" also
// carries the input upload). Events between kernels keep PDL from overlapping them: a decode step
// here is the one without PDL and graphs, a little slower. Prints ms and calls per pass by
// operator.
void ProfileOps(GpuModel& model, const char* what, int64_t tokens, int passes,
                const std::function<void()>& run) {
  std::vector<gpu::Event> events;
  std::vector<std::string> names = {"start"};
  events.push_back(Take(gpu::Event::Create(true), "event"));
  Check(events[0].Record(model.stream()), "record");
  model.SetOpHook([&](const char* op) -> absl::Status {
    KVTIER_ASSIGN_OR_RETURN(gpu::Event e, gpu::Event::Create(true));
    KVTIER_RETURN_IF_ERROR(e.Record(model.stream()));
    events.push_back(std::move(e));
    names.emplace_back(op);
    return absl::OkStatus();
  });
  run();
  model.SetOpHook(nullptr);
  Check(events.back().Synchronize(), "sync");
  std::map<std::string, std::pair<double, int>> by_op;  // ms, calls
  for (size_t i = 1; i < events.size(); ++i) {
    const float ms = Take(gpu::Event::ElapsedMs(events[i - 1], events[i]), "elapsed");
    by_op[names[i]].first += ms / passes;
    by_op[names[i]].second += 1;
  }
  const float total = Take(gpu::Event::ElapsedMs(events.front(), events.back()), "elapsed");
  std::string ops;
  for (const auto& [op, v] : by_op) {
    ops += fmt::format("{}\"{}\": [{:.3f}, {}]", ops.empty() ? "" : ", ", op, v.first,
                       v.second / passes);
  }
  std::printf(
      "{\"what\": \"%s\", \"tokens\": %lld, \"pass_ms\": %.3f, "
      "\"ms_and_calls_per_pass\": {%s}}\n",
      what, static_cast<long long>(tokens), total / passes, ops.c_str());
  std::fflush(stdout);
}

// A decode step after `context` tokens, kernel by kernel (the Gemv path), by operator.
void DecodeProfile(GpuModel& model, GpuKvPool& pool, int64_t context) {
  constexpr int kSteps = 4;
  model.SetDecodePath(true, false);
  GpuSequence seq(model, pool);
  Check(seq.Append(bench::RandomIds(context, model.config().vocab_size, 2), false).status(),
        "prefill");
  const int32_t token = 7;
  Check(seq.Append({&token, 1}, false).status(), "warm-up step");
  ProfileOps(model, "decode_profile", context, kSteps, [&] {
    for (int i = 0; i < kSteps; ++i) Check(seq.Append({&token, 1}, false).status(), "step");
  });
}

// Prefill of a prompt of n tokens (after a warm-up one), by operator.
void PrefillProfile(GpuModel& model, GpuKvPool& pool, int64_t n) {
  const std::vector<int32_t> prompt = bench::RandomIds(n, model.config().vocab_size, 1);
  {
    GpuSequence warm(model, pool);
    Check(warm.Append(prompt, false).status(), "warm-up");
  }
  GpuSequence seq(model, pool);
  ProfileOps(model, "prefill_profile", n, 1,
             [&] { Check(seq.Append(prompt, false).status(), "prefill"); });
}

// A batched decode step of `batch` sequences after 32-token prompts (the --decode-batches runs'
// shape), driven through GpuModel::Forward without the engine: the GPU's own time per step with
// batch graphs (steps enqueued back to back, timed by events: what the engine loop's host work
// adds is the difference from its ms per step), then a kernel-by-kernel step by operator.
void BatchDecodeGpuOnly(GpuModel& model, int64_t batch) {
  constexpr int64_t kPrompt = 32, kSteps = 16, kBlock = 16;
  const int64_t per_seq = (kPrompt + 2 * kSteps + 8) / kBlock + 1;
  auto pool = Take(GpuKvPool::Create(model.KvGeometry(kBlock),
                                     static_cast<int32_t>(batch * per_seq), model.dtype()),
                   "pool");
  std::vector<std::vector<int32_t>> prompts, tables;
  std::vector<engine::ChunkInput> chunks;
  for (int64_t b = 0; b < batch; ++b) {
    prompts.push_back(
        bench::RandomIds(kPrompt, model.config().vocab_size, static_cast<uint32_t>(b + 3)));
    tables.emplace_back(per_seq);
    std::iota(tables.back().begin(), tables.back().end(), static_cast<int32_t>(b * per_seq));
  }
  for (int64_t b = 0; b < batch; ++b) {  // prefill, as many prompts a call as a chunk holds
    chunks.push_back({prompts[b], 0, tables[b]});
    if (static_cast<int64_t>(chunks.size() + 1) * kPrompt > model.options().max_chunk_tokens ||
        b + 1 == batch) {
      Check(model.Forward(chunks, *pool).status(), "prefill");
      chunks.clear();
    }
  }
  const int32_t token = 7;
  int64_t start = kPrompt;
  auto step = [&] {
    std::vector<engine::ChunkInput> d;
    for (int64_t b = 0; b < batch; ++b) d.push_back({{&token, 1}, start, tables[b]});
    Check(model.Forward(d, *pool).status(), "decode step");
    ++start;
  };
  model.SetDecodePath(true, true);
  step();  // records the graph
  gpu::Event t0 = Take(gpu::Event::Create(true), "event");
  gpu::Event t1 = Take(gpu::Event::Create(true), "event");
  Check(t0.Record(model.stream()), "record");
  for (int i = 0; i < kSteps; ++i) step();
  Check(t1.Record(model.stream()), "record");
  Check(t1.Synchronize(), "sync");
  const float ms = Take(gpu::Event::ElapsedMs(t0, t1), "elapsed");
  std::printf(
      "{\"what\": \"decode_batch_gpu_only\", \"path\": \"graphs\", \"batch\": %lld, "
      "\"ms_per_step\": %.3f}\n",
      static_cast<long long>(batch), ms / kSteps);
  model.SetDecodePath(true, false);
  step();
  ProfileOps(model, "decode_batch_profile", batch, 4, [&] {
    for (int i = 0; i < 4; ++i) step();
  });
  model.SetDecodePath(true, true);
}

void Decode(const Flags& f, GpuModel& model, GpuKvPool& pool, engine::GpuSampler& sampler,
            const Ceilings& c) {
  const engine::ModelConfig& cfg = model.config();
  const double embed_bytes = cfg.tie_word_embeddings ? 0.0 : 2.0 * cfg.vocab_size * cfg.hidden_size;
  const double step_bytes = static_cast<double>(model.weight_bytes()) - embed_bytes;
  const double roofline_ms = step_bytes / (c.copy_gbps * 1e9) * 1e3;
  struct Path {
    const char* name;
    bool gemv, graphs, pdl;
  };
  for (int64_t context : f.decode_contexts) {
    for (const Path& p :
         {Path{"gemv+graphs", true, true, true}, Path{"gemv+graphs-nopdl", true, true, false},
          Path{"gemv", true, false, true}, Path{"cublaslt", false, false, true},
          Path{"cublaslt+graphs", false, true, true}}) {
      ops::gpu::SetProgrammaticLaunch(p.pdl);
      model.SetDecodePath(p.gemv, p.graphs);
      const absl::StatusOr<double> ms = DecodeMs(f, model, pool, sampler, context);
      if (!ms.ok()) {
        std::printf("{\"what\": \"decode\", \"path\": \"%s\", \"error\": \"%s\"}\n", p.name,
                    std::string(ms.status().message()).c_str());
        continue;
      }
      std::printf(
          "{\"what\": \"decode\", \"engine\": \"kvtier-gpu\", \"path\": \"%s\", "
          "\"batch\": 1, \"context\": %lld, \"ms_per_token\": %.3f, \"weights_gb\": %.2f, "
          "\"roofline_ms\": %.3f, \"of_roofline\": %.3f, \"read_gbps\": %.0f}\n",
          p.name, static_cast<long long>(context), *ms, step_bytes / 1e9, roofline_ms,
          roofline_ms / *ms, step_bytes / (*ms / 1e3) / 1e9);
      std::fflush(stdout);
    }
    for (const bool pdl : {true, false}) {
      ops::gpu::SetProgrammaticLaunch(pdl);
      model.SetDecodePath(true, true);
      const absl::StatusOr<double> gpu_ms = DecodeGpuOnlyMs(f, model, pool, context);
      if (gpu_ms.ok()) {
        std::printf(
            "{\"what\": \"decode_gpu_only\", \"path\": \"gemv+graphs%s\", \"context\": %lld, "
            "\"ms_per_step\": %.3f, \"of_roofline\": %.3f}\n",
            pdl ? "" : "-nopdl", static_cast<long long>(context), *gpu_ms, roofline_ms / *gpu_ms);
        std::fflush(stdout);
      }
    }
    DecodeProfile(model, pool, context);
  }
  ops::gpu::SetProgrammaticLaunch(true);
  model.SetDecodePath(true, true);
}

// The down projection of a decode step from the gate | up row: GemvSiluMul (SiLU-and-mul as the
// product reads it) against SiluAndMul then Gemv, 20 of each back to back.
void DownWithActivation(GpuModel& model, gpu::StreamHandle stream) {
  const int64_t n = model.config().hidden_size, k = model.config().intermediate_size;
  const size_t w_bytes = static_cast<size_t>(n * k * 2);
  void* w = Take(gpu::DeviceAlloc(w_bytes), "alloc");
  void* gate_up = Take(gpu::DeviceAlloc(static_cast<size_t>(4 * k)), "alloc");
  void* act = Take(gpu::DeviceAlloc(static_cast<size_t>(2 * k)), "alloc");
  void* y = Take(gpu::DeviceAlloc(static_cast<size_t>(2 * n)), "alloc");
  Check(gpu::MemsetAsync(w, 0x3c, w_bytes, stream), "fill");
  Check(gpu::MemsetAsync(gate_up, 0x3c, static_cast<size_t>(4 * k), stream), "fill");
  const ops::gpu::DType dt = model.dtype();
  const double fused = bench::BestSeconds(kProgram, 5, stream, [&] {
    const ops::gpu::GemmArgs a{.x = gate_up, .w = w, .m = 1, .n = n, .k = k, .y = y};
    for (int i = 0; i < 20; ++i) Check(ops::gpu::GemvSiluMul(dt, a, stream), "gemv silu");
  });
  const double apart = bench::BestSeconds(kProgram, 5, stream, [&] {
    const ops::gpu::GemmArgs a{.x = act, .w = w, .m = 1, .n = n, .k = k, .y = y};
    for (int i = 0; i < 20; ++i) {
      Check(ops::gpu::SiluAndMul(dt, gate_up, 1, k, act, stream), "silu");
      Check(ops::gpu::Gemv(dt, a, stream), "gemv");
    }
  });
  std::printf(
      "{\"what\": \"decode_down_with_activation\", \"gemv_silu_mul_us\": %.1f, "
      "\"silu_and_mul_then_gemv_us\": %.1f}\n",
      fused / 20 * 1e6, apart / 20 * 1e6);
  for (void* p : {w, gate_up, act, y}) Check(gpu::DeviceFree(p), "free");
}

// The decode step's linear layers alone (m = 1, the model's own weights): Gemv and cuBLASLt, each
// shape 20 times back to back, as read GB/s (weight bytes over the time).
void DecodeLinears(GpuModel& model, const Ceilings& c) {
  const engine::ModelConfig& cfg = model.config();
  const int64_t hidden = cfg.hidden_size, inter = cfg.intermediate_size;
  const int64_t qkv = cfg.q_dim() + 2 * cfg.kv_dim();
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const Shape shapes[] = {{"qkv", qkv, hidden},
                          {"o_proj", hidden, cfg.q_dim()},
                          {"gate_up", 2 * inter, hidden},
                          {"down", hidden, inter},
                          {"lm_head", cfg.vocab_size, hidden}};
  auto runner = Take(ops::gpu::GemmRunner::Create(), "gemm runner");
  gpu::Stream stream = Take(gpu::Stream::Create(), "stream");
  for (const Shape& sh : shapes) {
    const size_t w_bytes = static_cast<size_t>(sh.n * sh.k * 2);
    void* w = Take(gpu::DeviceAlloc(w_bytes), "alloc");
    void* x = Take(gpu::DeviceAlloc(static_cast<size_t>(sh.k * 2)), "alloc");
    void* y = Take(gpu::DeviceAlloc(static_cast<size_t>(sh.n * 4)), "alloc");
    Check(gpu::MemsetAsync(w, 0x3c, w_bytes, stream.handle()), "fill");
    Check(gpu::MemsetAsync(x, 0x3c, static_cast<size_t>(sh.k * 2), stream.handle()), "fill");
    const bool y_float = std::string(sh.name) == "lm_head";
    const ops::gpu::GemmArgs args{
        .x = x, .w = w, .m = 1, .n = sh.n, .k = sh.k, .y = y, .y_float = y_float};
    const double gemv =
        bench::BestSeconds(kProgram, 5, stream.handle(),
                           [&] {
                             for (int i = 0; i < 20; ++i)
                               Check(ops::gpu::Gemv(model.dtype(), args, stream.handle()), "gemv");
                           }) /
        20;
    const double lt =
        bench::BestSeconds(kProgram, 5, stream.handle(),
                           [&] {
                             for (int i = 0; i < 20; ++i)
                               Check(runner->Run(model.dtype(), args, stream.handle()), "gemm");
                           }) /
        20;
    std::printf(
        "{\"what\": \"decode_linear\", \"name\": \"%s\", \"n\": %lld, \"k\": %lld, "
        "\"gemv_us\": %.1f, \"gemv_gbps\": %.0f, \"cublaslt_us\": %.1f, "
        "\"cublaslt_gbps\": %.0f, \"copy_ceiling_gbps\": %.0f}\n",
        sh.name, static_cast<long long>(sh.n), static_cast<long long>(sh.k), gemv * 1e6,
        w_bytes / gemv / 1e9, lt * 1e6, w_bytes / lt / 1e9, c.copy_gbps);
    for (void* p : {w, x, y}) Check(gpu::DeviceFree(p), "free");
  }
  DownWithActivation(model, stream.handle());
  std::fflush(stdout);
}

// Prefill's linear layers alone at m = `rows` tokens (a chunk): cuBLASLt on each shape of a layer,
// and their sum over the model's layers — what TTFT at that length spends in GEMMs; the rest is
// attention (kvtier_attention_bench) and the row-wise ops.
void PrefillLinears(GpuModel& model, int64_t rows, const Ceilings& c) {
  const engine::ModelConfig& cfg = model.config();
  const int64_t hidden = cfg.hidden_size, inter = cfg.intermediate_size;
  const int64_t shapes[4][2] = {{cfg.q_dim() + 2 * cfg.kv_dim(), hidden},
                                {hidden, cfg.q_dim()},
                                {2 * inter, hidden},
                                {hidden, inter}};
  auto runner = Take(ops::gpu::GemmRunner::Create(), "gemm runner");
  gpu::Stream stream = Take(gpu::Stream::Create(), "stream");
  double layer_s = 0, flops = 0;
  for (const auto& sh : shapes) {
    const int64_t n = sh[0], k = sh[1];
    void* w = Take(gpu::DeviceAlloc(static_cast<size_t>(n * k * 2)), "alloc");
    void* x = Take(gpu::DeviceAlloc(static_cast<size_t>(rows * k * 2)), "alloc");
    void* y = Take(gpu::DeviceAlloc(static_cast<size_t>(rows * n * 2)), "alloc");
    Check(gpu::MemsetAsync(w, 0x3c, static_cast<size_t>(n * k * 2), stream.handle()), "fill");
    Check(gpu::MemsetAsync(x, 0x3c, static_cast<size_t>(rows * k * 2), stream.handle()), "fill");
    const ops::gpu::GemmArgs args{.x = x, .w = w, .m = rows, .n = n, .k = k, .y = y};
    layer_s += bench::BestSeconds(kProgram, 5, stream.handle(), [&] {
      Check(runner->Run(model.dtype(), args, stream.handle()), "gemm");
    });
    flops += 2.0 * static_cast<double>(rows * n * k);
    for (void* p : {w, x, y}) Check(gpu::DeviceFree(p), "free");
  }
  std::printf(
      "{\"what\": \"prefill_linears\", \"rows\": %lld, \"layer_ms\": %.3f, \"model_ms\": %.1f, "
      "\"tflops\": %.1f, \"gemm_ceiling_tflops\": %.1f}\n",
      static_cast<long long>(rows), layer_s * 1e3, layer_s * 1e3 * cfg.num_layers,
      flops / layer_s / 1e12, c.gemm_tflops);
  std::fflush(stdout);
}

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

float MaxAbs(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// Our logits and greedy tokens next to transformers' bf16 and float32 runs (hf_8b_golden.py).
void CompareGolden(const Flags& f, GpuModel& model, GpuKvPool& pool, engine::GpuSampler& sampler) {
  std::ifstream in(f.golden);
  if (!in.good()) bench::Die(kProgram, f.golden + ": cannot open");
  const nlohmann::json g = nlohmann::json::parse(in);
  const std::vector<int32_t> ids = g["ids"].get<std::vector<int32_t>>();
  const int64_t vocab = model.config().vocab_size;
  std::vector<float> ours(vocab);
  {
    GpuSequence seq(model, pool);
    const float* logits = Take(seq.Append(ids, false), "golden prefill");
    Check(gpu::DeviceSynchronize(), "sync");
    Check(gpu::CopyAsync(ours.data(), logits, vocab * sizeof(float), nullptr), "download");
    Check(gpu::DeviceSynchronize(), "sync");
  }
  engine::GenerateOptions gen;
  gen.max_tokens = 32;
  gen.stop_at_eos = false;
  const std::vector<int32_t> greedy = Take(engine::GenerateOnGpu(model, pool, ids, gen), "greedy");
  const auto bf16 = g["hf_bf16"]["last_logits"].get<std::vector<float>>();
  const auto fp32 = g["hf_fp32"]["last_logits"].get<std::vector<float>>();
  const auto bf16_tokens = g["hf_bf16"]["greedy"].get<std::vector<int32_t>>();
  const auto fp32_tokens = g["hf_fp32"]["greedy"].get<std::vector<int32_t>>();
  float scale = 0;
  for (float v : fp32) scale = std::max(scale, std::abs(v));
  auto argmax = [](const std::vector<float>& v) {
    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  std::printf(
      "{\"what\": \"golden\", \"prompt_tokens\": %zu, \"max_abs_logit_fp32\": %.4f, "
      "\"kvtier_vs_fp32_max_abs\": %.4f, \"hf_bf16_vs_fp32_max_abs\": %.4f, "
      "\"kvtier_vs_hf_bf16_max_abs\": %.4f, \"argmax\": [%d, %d, %d], "
      "\"greedy_prefix_kvtier_vs_hf_bf16\": %zu, \"greedy_prefix_kvtier_vs_fp32\": %zu, "
      "\"greedy_prefix_hf_bf16_vs_fp32\": %zu, \"of\": %zu}\n",
      ids.size(), scale, MaxAbs(ours, fp32), MaxAbs(bf16, fp32), MaxAbs(ours, bf16), argmax(ours),
      argmax(bf16), argmax(fp32), CommonPrefix(greedy, bf16_tokens),
      CommonPrefix(greedy, fp32_tokens), CommonPrefix(bf16_tokens, fp32_tokens), greedy.size());
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  const Flags f = ParseFlags(argc, argv);
  if (const std::string why = gpu::UnavailableReason(); !why.empty()) {
    std::printf("engine_bench: skipped: %s\n", why.c_str());
    return 0;
  }
  Ceilings c;
  {
    gpu::Stream stream = Take(gpu::Stream::Create(), "stream");
    c = MeasureCeilings(stream.handle());
  }
  std::printf(
      "{\"what\": \"ceiling\", \"gemm_bf16_8192_tflops\": %.1f, "
      "\"hbm_copy_1GiB_gbps_read_plus_write\": %.0f}\n",
      c.gemm_tflops, c.copy_gbps);
  const Clock::time_point t0 = Clock::now();
  engine::GpuModelOptions options;
  options.max_chunk_tokens = f.chunk;
  std::unique_ptr<GpuModel> model = Take(GpuModel::Load(f.model, options), "load");
  const engine::ModelConfig& cfg = model->config();
  const double params = static_cast<double>(model->weight_bytes()) / 2;
  std::printf(
      "{\"what\": \"model\", \"name\": \"%s\", \"layers\": %u, \"hidden\": %u, "
      "\"params\": %.0f, \"dtype\": \"%s\", \"load_s\": %.1f, \"chunk\": %lld}\n",
      cfg.name.c_str(), cfg.num_layers, cfg.hidden_size, params,
      ops::gpu::DTypeName(model->dtype()), Ms(Clock::now() - t0) / 1e3,
      static_cast<long long>(model->options().max_chunk_tokens));
  std::fflush(stdout);
  int64_t longest = 64;
  for (int64_t n : f.prefill) longest = std::max(longest, n);
  for (int64_t n : f.decode_contexts) longest = std::max(longest, n + f.decode_steps + 8);
  constexpr int64_t kBlockTokens = 16;
  auto pool =
      Take(GpuKvPool::Create(model->KvGeometry(kBlockTokens),
                             static_cast<int32_t>(longest / kBlockTokens + 2), model->dtype()),
           "pool");
  auto sampler = Take(engine::GpuSampler::Create(cfg.vocab_size), "sampler");
  if (!f.golden.empty()) CompareGolden(f, *model, *pool, *sampler);
  Prefill(f, *model, *pool, *sampler, c, params);
  if (!f.prefill.empty()) PrefillLinears(*model, model->options().max_chunk_tokens, c);
  for (int64_t n : f.prefill) PrefillProfile(*model, *pool, n);
  if (!f.decode_contexts.empty()) DecodeLinears(*model, c);
  Decode(f, *model, *pool, *sampler, c);
  if (!f.batch.batches.empty()) {
    pool.reset();  // the batched runs make pools of their own
    engine_bench::DecodeBatches(*model, f.batch, c.copy_gbps);
    for (int64_t batch : f.batch.batches) BatchDecodeGpuOnly(*model, batch);
  }
  return 0;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) { return kvtier::Main(argc, argv); }
