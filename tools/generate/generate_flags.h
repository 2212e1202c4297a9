// `kvtier generate`'s flags, parsed (generate_flags.cc declares them to CLI11; this header keeps
// CLI11 out of its includers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::generate {

struct GenerateFlags {
  std::string model;   // a Hugging Face model directory
  std::string prompt;  // the prompt text (UTF-8)
  int32_t max_tokens = 64;
  // Unset: the model's generation_config.json (sampling when it says do_sample, else greedy).
  std::optional<double> temperature;
  std::optional<int32_t> top_k;
  std::optional<double> top_p;
  uint64_t seed = 0;
  bool chat = false;         // render the prompt as one user message through the chat template
  bool show_prompt = false;  // print the prompt as the model sees it (rendered) on stderr
  // "gpu", "cpu", or "auto": the GPU when this build has a GPU backend and the machine a usable
  // device, else the CPU (saying why on stderr).
  std::string device = "auto";
  // kvtierd's socket: the KV blocks are the daemon's (engine/daemon_engine.h; T1 for the CPU, T0
  // for the GPU), so a prompt another engine (or an earlier run) computed is a prefix hit, and this
  // run's blocks stay cached for the next. Empty: a private pool.
  std::string daemon;
};

// Adds the flags to `cmd`; CLI11 checks ranges (exit code 2 naming the flag).
void AddGenerateFlags(CLI::App* cmd, GenerateFlags* flags);

}  // namespace kvtier::generate
