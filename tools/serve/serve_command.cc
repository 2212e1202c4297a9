#include "tools/serve/serve_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "engine/chat_template.h"
#include "engine/cpu_backend.h"
#include "engine/cpu_model.h"
#include "engine/daemon_engine.h"
#include "engine/gpu_backend.h"
#include "engine/gpu_model.h"
#include "engine/llm_engine.h"
#include "engine/tokenizer.h"
#include "kernels/gpu_runtime.h"
#include "tools/serve/engine_worker.h"
#include "tools/serve/http_io.h"
#include "tools/serve/http_server.h"
#include "tools/serve/serve_context.h"
#include "tools/serve/serve_flags.h"
#include "tools/serve/serve_metrics.h"

namespace kvtier::serve {
namespace {

constexpr int32_t kMaxAutoBlocks = 4096;

// The loaded model (CPU or GPU; it must outlive its backend) and tokenizer.
struct Loaded {
  std::unique_ptr<engine::CpuModel> cpu;
  std::unique_ptr<engine::GpuModel> gpu;
  std::unique_ptr<engine::Tokenizer> tokenizer;
  std::unique_ptr<engine::DaemonKv> daemon;  // --daemon: the engine's KV blocks are kvtierd's
  std::string why_not_gpu;                   // auto chose the CPU: why

  const engine::ModelConfig& config() const { return gpu ? gpu->config() : cpu->config(); }
};

absl::StatusOr<Loaded> LoadModel(const ServeFlags& f) {
  std::error_code ec;
  if (!std::filesystem::is_directory(f.model, ec)) {
    return absl::NotFoundError(
        fmt::format("--model {}: not a directory (want a Hugging Face model directory with "
                    "config.json, model.safetensors, tokenizer.json)",
                    f.model));
  }
  Loaded m;
  const std::string why = gpu::UnavailableReason();
  const bool use_gpu = f.device == "gpu" || (f.device == "auto" && why.empty());
  if (f.device == "auto" && !why.empty()) m.why_not_gpu = why;
  if (use_gpu) {
    KVTIER_ASSIGN_OR_RETURN(m.gpu, engine::GpuModel::Load(f.model));
  } else {
    KVTIER_ASSIGN_OR_RETURN(m.cpu, engine::CpuModel::Load(f.model));
  }
  KVTIER_ASSIGN_OR_RETURN(m.tokenizer, engine::Tokenizer::Load(f.model));
  return m;
}

// The KV pool's size in blocks (serve_flags.h says the default).
int32_t KvBlocks(const ServeFlags& f, int64_t max_model_len) {
  if (f.kv_blocks > 0) return f.kv_blocks;
  const int64_t per_context = (max_model_len + f.block_tokens - 1) / f.block_tokens;
  const int64_t contexts = std::min(f.max_concurrent, f.max_running);
  return static_cast<int32_t>(
      std::max(per_context, std::min<int64_t>(contexts * per_context, kMaxAutoBlocks)));
}

engine::EngineOptions Options(const ServeFlags& f, int64_t max_model_len) {
  engine::EngineOptions options;
  options.max_running = f.max_running;
  options.max_step_tokens = f.max_step_tokens;
  options.max_model_len = max_model_len;
  options.prefix_caching = !f.no_prefix_caching;
  return options;
}

static_assert(ServeFlags{}.room_patience_steps == engine::kDefaultRoomPatienceSteps);

// --lowest-prefix-tier's tier ("t0".."t3": TierName, lower case).
absl::StatusOr<Tier> TierNamed(const std::string& name) {
  for (int i = 0; i < kNumTiers; ++i) {
    const std::string_view tier = TierName(TierAt(i));
    if (absl::EqualsIgnoreCase(absl::string_view(tier.data(), tier.size()), name)) return TierAt(i);
  }
  return absl::InvalidArgumentError(
      fmt::format("--lowest-prefix-tier: '{}' is not t0, t1, t2 or t3", name));
}

// The engine over kvtierd's slots (engine/daemon_engine.h): the CPU backend attends in T1, the
// GPU backend in T0.
absl::StatusOr<std::unique_ptr<engine::LlmEngine>> CreateDaemonEngine(const ServeFlags& f,
                                                                      Loaded& m,
                                                                      int64_t max_model_len) {
  engine::DaemonEngineOptions o;
  o.socket_path = f.daemon;
  o.client_name = "kvtier-serve";
  o.block_tokens = f.block_tokens;
  o.engine = Options(f, max_model_len);
  o.engine.room_patience_steps = f.room_patience_steps;
  KVTIER_ASSIGN_OR_RETURN(o.lowest_prefix_tier, TierNamed(f.lowest_prefix_tier));
  absl::StatusOr<engine::DaemonEngine> d = engine::CreateDaemonEngine(m.cpu.get(), m.gpu.get(), o);
  if (!d.ok()) {
    return absl::Status(d.status().code(),
                        fmt::format("--daemon: {}", std::string(d.status().message())));
  }
  m.daemon = std::move(d->kv);
  return std::move(d->engine);
}

absl::StatusOr<std::unique_ptr<engine::LlmEngine>> CreateEngine(const ServeFlags& f, Loaded& m,
                                                                int64_t max_model_len) {
  if (!f.daemon.empty()) return CreateDaemonEngine(f, m, max_model_len);
  std::unique_ptr<engine::ModelBackend> backend;
  const int32_t blocks = KvBlocks(f, max_model_len);
  if (m.gpu) {
    KVTIER_ASSIGN_OR_RETURN(backend, engine::GpuBackend::Create(*m.gpu, f.block_tokens, blocks));
  } else {
    backend = std::make_unique<engine::CpuBackend>(*m.cpu, f.block_tokens, blocks);
  }
  return engine::LlmEngine::Create(std::move(backend), Options(f, max_model_len));
}

absl::Status Serve(const ServeFlags& f) {
  KVTIER_ASSIGN_OR_RETURN(Loaded m, LoadModel(f));
  const engine::ModelConfig& config = m.config();
  if (f.max_model_len > config.max_position_embeddings) {
    return absl::InvalidArgumentError(fmt::format(
        "--max-model-len {} is past the model's context ({} tokens, max_position_embeddings)",
        f.max_model_len, config.max_position_embeddings));
  }
  const int64_t max_model_len =
      f.max_model_len > 0 ? f.max_model_len : config.max_position_embeddings;
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<engine::LlmEngine> engine,
                          CreateEngine(f, m, max_model_len));
  ServeMetrics metrics;
  ServeContext ctx;
  ctx.model_name = f.served_model_name.empty() ? config.name : f.served_model_name;
  ctx.tokenizer = m.tokenizer.get();
  if (absl::StatusOr<engine::ChatTemplate> t = engine::ChatTemplate::FromTokenizer(*m.tokenizer);
      t.ok()) {
    ctx.chat_template = std::move(*t);
  } else {
    std::fprintf(stderr, "kvtier serve: no chat template (%s): /v1/chat/completions refuses\n",
                 std::string(t.status().message()).c_str());
  }
  ctx.metrics = &metrics;
  ctx.generation = config.generation;
  ctx.vocab_size = config.vocab_size;
  ctx.max_model_len = max_model_len;
  ctx.max_concurrent = f.max_concurrent;
  ctx.max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  SetIdleTimeout(std::chrono::seconds(f.idle_timeout_s));
  EngineWorker worker(std::move(engine), *m.tokenizer, metrics);
  ctx.worker = &worker;
  const std::string host = f.host == "localhost" ? "127.0.0.1" : f.host;
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server,
                          HttpServer::Create(ctx, host, f.port));
  if (!m.why_not_gpu.empty()) {
    std::fprintf(stderr, "kvtier serve: running on the CPU: %s\n", m.why_not_gpu.c_str());
  }
  std::printf("kvtier serve: serving %s on http://%s:%u (%s, %s backend, context %lld tokens)\n",
              ctx.model_name.c_str(), host.c_str(), server->port(),
              std::string(engine::ArchitectureName(config.architecture)).c_str(),
              m.gpu ? "gpu" : "cpu", static_cast<long long>(max_model_len));
  std::fflush(stdout);
  server->Run(f.http_threads, std::chrono::seconds(f.drain_timeout_s));
  worker.Stop();
  return absl::OkStatus();
}

int Run(const ServeFlags& f) {
  if (f.device == "gpu") {
    if (const std::string why = gpu::UnavailableReason(); !why.empty()) {
      std::fprintf(stderr,
                   "kvtier serve: --device gpu: the GPU backend is not available: %s; use "
                   "--device cpu\n",
                   why.c_str());
      return 2;
    }
  }
  if (absl::Status s = Serve(f); !s.ok()) {
    std::fprintf(stderr, "kvtier serve: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a model over an OpenAI-compatible HTTP API (completions, chat, SSE, metrics)");
  auto flags = std::make_shared<ServeFlags>();
  AddServeFlags(cmd, flags.get());
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace kvtier::serve
