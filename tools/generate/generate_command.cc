#include "tools/generate/generate_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/chat_template.h"
#include "engine/cpu_kv_pool.h"
#include "engine/cpu_model.h"
#include "engine/cpu_sequence.h"
#include "engine/daemon_engine.h"
#include "engine/gpu_kv_pool.h"
#include "engine/gpu_model.h"
#include "engine/gpu_sequence.h"
#include "engine/stream_decoder.h"
#include "engine/tokenizer.h"
#include "kernels/gpu_runtime.h"
#include "tools/generate/generate_flags.h"

namespace kvtier::generate {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kBlockTokens = 16;  // the KV pools' slot size (any size computes the same)

// Where the request runs: --device gpu or cpu as asked; auto: the GPU when this build has a GPU
// backend and the machine a usable device, else the CPU, with the reason kept to be shown.
struct Device {
  bool gpu = false;
  std::string why_not_gpu;  // set when auto fell back to the CPU
};

Device ChooseDevice(const std::string& flag) {
  if (flag == "cpu") return {};
  const std::string why = gpu::UnavailableReason();
  if (flag == "gpu" || why.empty()) return {.gpu = true, .why_not_gpu = ""};
  return {.gpu = false, .why_not_gpu = why};
}

// One of the two backends, loaded, and the tokenizer.
struct Loaded {
  std::unique_ptr<engine::CpuModel> cpu;
  std::unique_ptr<engine::GpuModel> gpu;
  std::unique_ptr<engine::Tokenizer> tokenizer;

  const engine::ModelConfig& config() const { return gpu ? gpu->config() : cpu->config(); }
  std::string backend() const {
    return gpu ? fmt::format("gpu {}", ops::gpu::DTypeName(gpu->dtype())) : "cpu fp32";
  }
};

absl::StatusOr<Loaded> LoadModel(const std::string& dir, const Device& device) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(
        fmt::format("--model {}: not a directory (want a Hugging Face model directory with "
                    "config.json, model.safetensors, tokenizer.json)",
                    dir));
  }
  Loaded loaded;
  if (device.gpu) {
    KVTIER_ASSIGN_OR_RETURN(loaded.gpu, engine::GpuModel::Load(dir));
  } else {
    KVTIER_ASSIGN_OR_RETURN(loaded.cpu, engine::CpuModel::Load(dir));
  }
  KVTIER_ASSIGN_OR_RETURN(loaded.tokenizer, engine::Tokenizer::Load(dir));
  return loaded;
}

// Runs the request through an engine on kvtierd's slots (--daemon), saying on stderr how many
// prompt tokens each tier gave.
absl::StatusOr<std::vector<int32_t>> RunOnDaemon(const GenerateFlags& f, const Loaded& m,
                                                 const std::vector<int32_t>& prompt,
                                                 const engine::GenerateOptions& options,
                                                 const std::function<void(int32_t)>& on_token) {
  engine::DaemonEngineOptions o;
  o.socket_path = f.daemon;
  o.client_name = "kvtier-generate";
  o.block_tokens = kBlockTokens;
  absl::StatusOr<engine::DaemonEngine> d = engine::CreateDaemonEngine(m.cpu.get(), m.gpu.get(), o);
  if (!d.ok()) {
    return absl::Status(d.status().code(),
                        fmt::format("--daemon: {}", std::string(d.status().message())));
  }
  engine::RequestOptions r;
  // FitMaxTokens allows prompt + max_tokens = context + 1 (the last token is chosen, never run);
  // the engine keeps prompt + max_tokens within its max_model_len (the context).
  const int64_t context = m.config().max_position_embeddings;
  const auto room =
      static_cast<int32_t>(std::max<int64_t>(1, context - static_cast<int64_t>(prompt.size())));
  r.max_tokens = std::min(options.max_tokens, room);
  r.sampling = options.sampling;
  r.ignore_eos = !options.stop_at_eos;
  KVTIER_ASSIGN_OR_RETURN(const uint64_t id, d->engine->Add(prompt, r));
  std::vector<int32_t> out;
  for (bool done = false; !done;) {
    KVTIER_ASSIGN_OR_RETURN(engine::StepOutput step, d->engine->Step());
    for (const engine::StepOutput::Token& t : step.tokens) {
      if (t.id == id) on_token(t.token);
    }
    for (const engine::RequestOutput& fin : step.finished) {
      if (fin.id != id) continue;
      done = true;
      out = fin.tokens;
      const engine::CachedBySource& c = fin.prompt_cached_from;
      std::fprintf(stderr,
                   "kvtier generate: %lld of %lld prompt tokens from kvtierd (T0 %lld, T1 %lld, "
                   "T2 %lld, T3 %lld)\n",
                   static_cast<long long>(fin.prompt_cached_tokens),
                   static_cast<long long>(fin.prompt_tokens), static_cast<long long>(c[1]),
                   static_cast<long long>(c[2]), static_cast<long long>(c[3]),
                   static_cast<long long>(c[4]));
    }
    if (step.waiting_for_room) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return out;
}

// Runs the request on the loaded backend, with a KV pool just large enough for it.
absl::StatusOr<std::vector<int32_t>> RunGeneration(const GenerateFlags& f, const Loaded& m,
                                                   const std::vector<int32_t>& prompt,
                                                   const engine::GenerateOptions& options,
                                                   const std::function<void(int32_t)>& on_token) {
  if (!f.daemon.empty()) return RunOnDaemon(f, m, prompt, options, on_token);
  const int64_t tokens = static_cast<int64_t>(prompt.size()) + options.max_tokens;
  const auto slots = static_cast<int32_t>((tokens + kBlockTokens - 1) / kBlockTokens);
  if (m.gpu) {
    KVTIER_ASSIGN_OR_RETURN(
        std::unique_ptr<engine::GpuKvPool> pool,
        engine::GpuKvPool::Create(m.gpu->KvGeometry(kBlockTokens), slots, m.gpu->dtype()));
    return engine::GenerateOnGpu(*m.gpu, *pool, prompt, options, on_token);
  }
  engine::CpuKvPool pool(m.cpu->KvGeometry(kBlockTokens), slots);
  return engine::Generate(*m.cpu, pool, prompt, options, on_token);
}

// The prompt's token ids: as text (with the tokenizer's own special tokens, e.g. Llama 3's BOS),
// or rendered as one user message through the chat template, which writes its special tokens
// itself (transformers' apply_chat_template(tokenize=True) encodes without adding any).
absl::StatusOr<std::vector<int32_t>> PromptTokens(const GenerateFlags& f,
                                                  const engine::Tokenizer& tokenizer) {
  std::string text = f.prompt;
  if (f.chat) {
    KVTIER_ASSIGN_OR_RETURN(engine::ChatTemplate tmpl,
                            engine::ChatTemplate::FromTokenizer(tokenizer));
    const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", f.prompt}}};
    KVTIER_ASSIGN_OR_RETURN(text, tmpl.Render(messages, engine::ChatOptions{}));
  }
  if (f.show_prompt) std::fprintf(stderr, "%s", text.c_str());
  KVTIER_ASSIGN_OR_RETURN(std::vector<engine::TokenId> ids,
                          tokenizer.Encode(text, /*add_special_tokens=*/!f.chat));
  if (ids.empty()) return absl::InvalidArgumentError("--prompt: encodes to no tokens");
  return std::vector<int32_t>(ids.begin(), ids.end());
}

// The flags where given, else what generation_config.json asks for (greedy unless do_sample).
ops::SamplingParams Sampling(const GenerateFlags& f, const engine::GenerationConfig& g) {
  ops::SamplingParams p;
  const bool model_samples = g.do_sample.value_or(false);
  p.temperature =
      static_cast<float>(f.temperature.value_or(model_samples ? g.temperature.value_or(1) : 0));
  p.top_k = f.top_k.value_or(model_samples ? static_cast<int32_t>(g.top_k.value_or(0)) : 0);
  p.top_p = static_cast<float>(f.top_p.value_or(model_samples ? g.top_p.value_or(1) : 1));
  p.seed = f.seed;
  return p;
}

// How many new tokens fit: positions 0 .. context - 1 hold the prompt and every new token but the
// last (which is chosen, never run).
absl::StatusOr<int32_t> FitMaxTokens(const GenerateFlags& f, int64_t prompt_tokens,
                                     int64_t context) {
  if (prompt_tokens > context) {
    return absl::InvalidArgumentError(
        fmt::format("--prompt is {} tokens; the model's context is {} (max_position_embeddings in "
                    "{}/config.json)",
                    prompt_tokens, context, f.model));
  }
  const int64_t room = context - prompt_tokens + 1;
  if (f.max_tokens > room) {
    std::fprintf(stderr, "kvtier generate: --max-tokens %d cut to %lld: the context ends there\n",
                 f.max_tokens, static_cast<long long>(room));
    return static_cast<int32_t>(room);
  }
  return f.max_tokens;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One line on stderr, so that stdout holds only the generated text.
void PrintTimes(const Loaded& m, size_t prompt_tokens, size_t new_tokens, Clock::duration load,
                Clock::duration prefill, Clock::duration decode) {
  const double decode_ms = new_tokens > 1 ? Ms(decode) / static_cast<double>(new_tokens - 1) : 0;
  const engine::ModelConfig& config = m.config();
  std::fprintf(stderr,
               "kvtier generate: %s (%s, %s): %zu prompt tokens, %zu new; load %.0f ms, "
               "first token %.0f ms, decode %.1f ms/token\n",
               config.name.c_str(),
               std::string(engine::ArchitectureName(config.architecture)).c_str(),
               m.backend().c_str(), prompt_tokens, new_tokens, Ms(load), Ms(prefill), decode_ms);
}

absl::Status Generate(const GenerateFlags& f, const Device& device) {
  const Clock::time_point begin = Clock::now();
  KVTIER_ASSIGN_OR_RETURN(Loaded m, LoadModel(f.model, device));
  const engine::ModelConfig& config = m.config();
  KVTIER_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptTokens(f, *m.tokenizer));
  if (!device.why_not_gpu.empty()) {
    std::fprintf(stderr, "kvtier generate: running on the CPU: %s\n", device.why_not_gpu.c_str());
  }
  const int64_t context = config.max_position_embeddings;
  KVTIER_ASSIGN_OR_RETURN(const int32_t max_tokens,
                          FitMaxTokens(f, static_cast<int64_t>(prompt.size()), context));
  engine::GenerateOptions options;
  options.max_tokens = max_tokens;
  options.sampling = Sampling(f, config.generation);
  const Clock::time_point loaded = Clock::now();
  Clock::time_point first = loaded;
  engine::StreamDecoder decoder(*m.tokenizer, /*skip_special_tokens=*/true);
  auto on_token = [&](int32_t id) {
    if (first == loaded) first = Clock::now();
    const std::string text = decoder.Push(id);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  KVTIER_ASSIGN_OR_RETURN(std::vector<int32_t> out, RunGeneration(f, m, prompt, options, on_token));
  const std::string rest = decoder.Finish();
  std::fprintf(stdout, "%s\n", rest.c_str());
  std::fflush(stdout);
  PrintTimes(m, prompt.size(), out.size(), loaded - begin, first - loaded, Clock::now() - first);
  return absl::OkStatus();
}

int Run(const GenerateFlags& f) {
  const Device device = ChooseDevice(f.device);
  if (f.device == "gpu") {
    if (const std::string why = gpu::UnavailableReason(); !why.empty()) {
      std::fprintf(stderr,
                   "kvtier generate: --device gpu: the GPU backend is not available: %s; use "
                   "--device cpu\n",
                   why.c_str());
      return 2;
    }
  }
  if (absl::Status s = Generate(f, device); !s.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "kvtier generate: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Run one prompt through the bundled engine (GPU or CPU backend), streaming the text");
  auto flags = std::make_shared<GenerateFlags>();
  AddGenerateFlags(cmd, flags.get());
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace kvtier::generate
