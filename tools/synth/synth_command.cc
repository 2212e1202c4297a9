#include "tools/synth/synth_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "tools/common/progress.h"
#include "tools/synth/synth.h"
#include "tools/synth/synth_writer.h"

namespace kvtier::synth {
namespace {

struct SynthFlags {
  SynthConfig config;
  std::string out = "-";
};

void AddFlags(CLI::App* cmd, SynthFlags* f) {
  SynthConfig& c = f->config;
  cmd->add_option("-o,--out", f->out, "Output file; - for stdout; .gz or .zst compresses")
      ->capture_default_str();
  cmd->add_option("--seed", c.seed, "Random seed: the same seed gives the same trace")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.rfind('-', 0) == 0 ? std::string("must be a non-negative integer")
                                        : std::string();
          },
          "", "non-negative"))
      ->capture_default_str();
  cmd->add_option("-n,--requests", c.requests, "Requests to generate (1 to 1e9)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000000}))
      ->capture_default_str();
  cmd->add_option("--block-tokens", c.block_tokens, "Tokens per block (hash id)")
      ->capture_default_str();
  cmd->add_option("--chat", c.chat_fraction, "Share of multi-turn chat requests")
      ->capture_default_str();
  cmd->add_option("--rag", c.rag_fraction, "Share of RAG requests (prompt + shared documents)")
      ->capture_default_str();
  cmd->add_option("--agent", c.agent_fraction,
                  "Share of agent steps (long contexts, small appends)")
      ->capture_default_str();
  cmd->add_option("--zipf", c.zipf_alpha, "Zipf exponent of prompt and document popularity")
      ->capture_default_str();
  cmd->add_option("--sessions", c.sessions, "Chat sessions open at once")->capture_default_str();
  cmd->add_option("--agents", c.agents, "Agent sessions open at once")->capture_default_str();
  cmd->add_option("--system-prompts", c.system_prompts, "Distinct system prompts")
      ->capture_default_str();
  cmd->add_option("--documents", c.documents, "Distinct RAG documents")->capture_default_str();
  cmd->add_option("--turns", c.mean_turns, "Mean turns per chat session")->capture_default_str();
  cmd->add_option("--agent-steps", c.mean_agent_steps, "Mean steps per agent session")
      ->capture_default_str();
  cmd->add_option("--rate", c.rate, "Arrivals per second (Poisson); sets the timestamps")
      ->capture_default_str();
  cmd->add_option("--max-context", c.max_context, "Longest prompt in tokens; longer sessions end")
      ->capture_default_str();
}

int Run(const SynthFlags& f) {
  if (absl::Status valid = f.config.Validate(); !valid.ok()) {
    std::fprintf(stderr, "kvtier synth: %s\n", std::string(valid.message()).c_str());
    return 2;
  }
  ProgressBar bar("synth");
  absl::Status status = WriteSynthTrace(f.config, f.out, [&bar, &f](uint64_t done, uint64_t total) {
    if (f.out != "-") bar.Update(done, total);  // a bar would interleave with the trace on a tty
  });
  if (!status.ok()) {
    std::fprintf(stderr, "kvtier synth: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterSynthCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("synth",
                                     "Generate a seeded, reproducible workload (multi-turn chat, "
                                     "RAG with shared documents, agents) "
                                     "as a Mooncake-format trace");
  auto flags = std::make_shared<SynthFlags>();
  AddFlags(cmd, flags.get());
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace kvtier::synth
