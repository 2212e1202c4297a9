#include "tools/generate/generate_flags.h"

#include <CLI/CLI.hpp>

namespace kvtier::generate {

void AddGenerateFlags(CLI::App* cmd, GenerateFlags* f) {
  cmd->add_option("--model", f->model,
                  "Hugging Face model directory (config.json, safetensors, "
                  "tokenizer.json, tokenizer_config.json)")
      ->required();
  cmd->add_option("--prompt", f->prompt, "The prompt text")->required();
  cmd->add_option("-n,--max-tokens", f->max_tokens, "New tokens at most (stops earlier at eos)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--temperature", f->temperature,
                  "0: greedy; else sample at this temperature (default: generation_config.json)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", f->top_k, "Keep the K most likely tokens; 0: off")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--top-p", f->top_p, "Keep the most likely tokens up to this mass; 1: off")
      ->check(CLI::Range(0.0, 1.0) &
              CLI::Validator([](std::string& s) { return std::stod(s) > 0 ? "" : "must be > 0"; },
                             "(0, 1]"));
  cmd->add_option("--seed", f->seed, "Seed of the sampling draws (same seed, same text)")
      ->capture_default_str();
  cmd->add_flag("--chat", f->chat,
                "Send the prompt as a user message through the model's chat template");
  cmd->add_flag("--show-prompt", f->show_prompt,
                "Print the prompt as the model sees it (after the chat template) on stderr");
  cmd->add_option("--device", f->device,
                  "gpu (bf16/fp16), cpu (fp32), or auto: the GPU when there is one, else the CPU")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_option("--daemon", f->daemon,
                  "kvtierd's socket: keep the KV blocks in the daemon (its T1 slots must be one "
                  "16-token block, fp32 on the CPU; T0 on the engine's GPU), so prompts it has "
                  "cached are prefix hits");
}

}  // namespace kvtier::generate
