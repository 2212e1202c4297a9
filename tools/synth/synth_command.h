// `kvtier synth`: a seeded workload generator writing Mooncake-format traces.
#pragma once

#include <CLI/CLI.hpp>

namespace kvtier::synth {

// Adds the `synth` subcommand to `app`; its exit code goes to *exit_code as for replay.
void RegisterSynthCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::synth
