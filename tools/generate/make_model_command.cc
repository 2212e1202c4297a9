#include "tools/generate/make_model_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "tools/generate/random_model.h"

namespace kvtier::generate {
namespace {

struct MakeModelFlags {
  RandomModelOptions options;
  std::string arch = "qwen3";
};

absl::StatusOr<engine::Architecture> ParseArchitecture(const std::string& name) {
  if (name == "llama") return engine::Architecture::kLlama;
  if (name == "qwen2") return engine::Architecture::kQwen2;
  if (name == "qwen3") return engine::Architecture::kQwen3;
  if (name == "mistral") return engine::Architecture::kMistral;
  return absl::InvalidArgumentError("--arch " + name + ": expected llama, qwen2, qwen3 or mistral");
}

void AddFlags(CLI::App* cmd, MakeModelFlags* f) {
  RandomModelOptions* o = &f->options;
  cmd->add_option("--out", o->out_dir, "The model directory to write (created if missing)")
      ->required();
  cmd->add_option(
         "--tokenizer", o->tokenizer_dir,
         "A directory with tokenizer.json + tokenizer_config.json (copied; sets vocab_size), "
         "e.g. third_party/tokenizers/qwen3")
      ->required();
  cmd->add_option("--arch", f->arch, "Architecture")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "mistral"}))
      ->capture_default_str();
  const auto count = CLI::Range(1u, 1u << 20);
  cmd->add_option("--layers", o->layers, "Decoder layers")->check(count)->capture_default_str();
  cmd->add_option("--hidden", o->hidden, "Hidden size")->check(count)->capture_default_str();
  cmd->add_option("--heads", o->heads, "Query heads")->check(count)->capture_default_str();
  cmd->add_option("--kv-heads", o->kv_heads, "KV heads (divides --heads)")
      ->check(count)
      ->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim, "Head size (default: hidden / heads)")->check(count);
  cmd->add_option("--intermediate", o->intermediate, "MLP size (default: 3 * hidden)")
      ->check(count);
  cmd->add_option("--max-position", o->max_position, "Context length (max_position_embeddings)")
      ->check(count)
      ->capture_default_str();
  cmd->add_option("--sliding-window", o->sliding_window,
                  "Mistral only: attention window in tokens; 0: none")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random weights")->capture_default_str();
}

int Run(const MakeModelFlags& f) {
  RandomModelOptions o = f.options;
  absl::StatusOr<engine::Architecture> architecture = ParseArchitecture(f.arch);
  if (!architecture.ok()) {
    std::fprintf(stderr, "kvtier make-model: %s\n",
                 std::string(architecture.status().message()).c_str());
    return 2;
  }
  o.architecture = *architecture;
  if (o.sliding_window != 0 && o.architecture != engine::Architecture::kMistral) {
    std::fprintf(stderr, "kvtier make-model: --sliding-window: only --arch mistral has one\n");
    return 2;
  }
  absl::StatusOr<RandomModelSummary> made = WriteRandomModel(o);
  if (!made.ok()) {
    std::fprintf(stderr, "kvtier make-model: %s\n", std::string(made.status().message()).c_str());
    return 1;
  }
  const engine::ModelConfig& c = made->config;
  std::printf(
      "kvtier make-model: wrote %s: %s, %u layers, hidden %u, %u/%u heads of %u, vocab %u, "
      "%.1f M parameters (%.1f MB bf16)\n"
      "The weights are random: the model runs at a real architecture, but its text is "
      "meaningless.\n"
      "Try: kvtier generate --model %s --prompt 'Hello' --max-tokens 16\n",
      o.out_dir.c_str(), std::string(engine::ArchitectureName(c.architecture)).c_str(),
      c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size,
      made->parameters / 1e6, made->safetensors_bytes / 1e6, o.out_dir.c_str());
  return 0;
}

}  // namespace

void RegisterMakeModelCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Write a model directory with random weights (to try generate; its text is "
      "meaningless)");
  auto flags = std::make_shared<MakeModelFlags>();
  AddFlags(cmd, flags.get());
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace kvtier::generate
