// `kvtier`: the operator's command line. Each subcommand lives in its own directory and registers
// itself here; see `kvtier --help`.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "tools/replay/replay_command.h"
#include "tools/synth/synth_command.h"

int main(int argc, char** argv) {
  CLI::App app{"kvtier: tiered KV-cache tools (trace replay, workload synthesis)"};
  app.require_subcommand(1);
  int exit_code = 0;
  kvtier::replay::RegisterReplayCommand(app, &exit_code);
  kvtier::synth::RegisterSynthCommand(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
