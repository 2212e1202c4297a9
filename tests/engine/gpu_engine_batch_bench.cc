#include "tests/engine/gpu_engine_batch_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "engine/gpu_backend.h"
#include "engine/llm_engine.h"
#include "kernels/ops/gpu/ops_gpu.h"
#include "tests/bench/gpu_bench_util.h"

namespace kvtier::engine_bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kProgram[] = "engine_bench";
constexpr int64_t kBlockTokens = 16;

template <typename T>
T Take(absl::StatusOr<T> v, const char* what) {
  return bench::Take(kProgram, std::move(v), what);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct RunResult {
  double total_ms = 0;   // first Add to the last token, host to host
  double decode_ms = 0;  // the steps after the first (all of them decode-only)
  int64_t decode_steps = 0;
  int64_t tokens = 0;
  int64_t steps = 0;
};

// `batch` requests of random prompts, added at once. The step budget holds every prompt, so the
// first step prefills them all and each later step decodes one token for every request.
RunResult RunOnce(engine::GpuModel& model, const BatchDecodeFlags& f, int64_t batch,
                  uint32_t seed) {
  const int64_t per_seq = (f.prompt_tokens + f.new_tokens + kBlockTokens) / kBlockTokens + 1;
  auto backend = Take(
      engine::GpuBackend::Create(model, kBlockTokens, static_cast<int32_t>(batch * per_seq + 8)),
      "backend");
  engine::EngineOptions options;
  options.max_running = static_cast<int32_t>(batch);
  options.max_step_tokens =
      std::min(std::max<int64_t>(batch * f.prompt_tokens, 512), model.options().max_chunk_tokens);
  options.prefix_caching = false;
  auto engine = Take(engine::LlmEngine::Create(std::move(backend), options), "engine");
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(model.config().vocab_size) - 1);
  engine::RequestOptions request;
  request.max_tokens = f.new_tokens;
  request.ignore_eos = true;
  RunResult r;
  const Clock::time_point t0 = Clock::now();
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int32_t> prompt(static_cast<size_t>(f.prompt_tokens));
    for (int32_t& t : prompt) t = id(rng);
    Take(engine->Add(std::move(prompt), request), "add");
  }
  Clock::time_point decode_start = t0;
  while (!engine->idle()) {
    const engine::StepOutput out = Take(engine->Step(), "step");
    r.tokens += static_cast<int64_t>(out.tokens.size());
    if (++r.steps == 1) decode_start = Clock::now();
  }
  const Clock::time_point end = Clock::now();
  r.total_ms = Ms(end - t0);
  r.decode_ms = Ms(end - decode_start);
  r.decode_steps = r.steps - 1;
  return r;
}

}  // namespace

void DecodeBatches(engine::GpuModel& model, const BatchDecodeFlags& f, double copy_gbps) {
  const engine::ModelConfig& cfg = model.config();
  const double embed_bytes = cfg.tie_word_embeddings ? 0.0 : 2.0 * cfg.vocab_size * cfg.hidden_size;
  const double step_bytes = static_cast<double>(model.weight_bytes()) - embed_bytes;
  const double roofline_ms = step_bytes / (copy_gbps * 1e9) * 1e3;
  for (int64_t batch : f.batches) {
    for (const bool graphs : {true, false}) {
      model.SetDecodePath(true, graphs);
      (void)RunOnce(model, f, batch, 1);  // warm-up: records the graphs, plans the GEMMs
      const RunResult r = RunOnce(model, f, batch, 2);
      const double ms_per_step = r.decode_ms / static_cast<double>(r.decode_steps);
      const double decode_tps = static_cast<double>(batch) / (ms_per_step / 1e3);
      const double ceiling_tps = static_cast<double>(batch) / (roofline_ms / 1e3);
      std::printf(
          "{\"what\": \"decode_batch\", \"engine\": \"kvtier-gpu\", \"path\": \"%s\", "
          "\"batch\": %lld, \"prompt_tokens\": %lld, \"new_tokens\": %d, \"tokens\": %lld, "
          "\"steps\": %lld, \"total_ms\": %.1f, \"tokens_per_s\": %.1f, "
          "\"decode_ms_per_step\": %.3f, \"decode_tokens_per_s\": %.1f, "
          "\"roofline_ms_per_step\": %.3f, \"ceiling_tokens_per_s\": %.1f, "
          "\"decode_of_ceiling\": %.3f}\n",
          graphs ? "engine+graphs" : "engine", static_cast<long long>(batch),
          static_cast<long long>(f.prompt_tokens), f.new_tokens, static_cast<long long>(r.tokens),
          static_cast<long long>(r.steps), r.total_ms,
          static_cast<double>(r.tokens) / (r.total_ms / 1e3), ms_per_step, decode_tps, roofline_ms,
          ceiling_tps, decode_tps / ceiling_tps);
      std::fflush(stdout);
    }
  }
  model.SetDecodePath(true, true);
}

}  // namespace kvtier::engine_bench
