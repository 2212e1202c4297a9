// `kvtier synth`: a seeded workload generator writing Mooncake-format traces.
#pragma once

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::synth {

// Adds the `synth` subcommand to `app`; its exit code goes to *exit_code as for replay.
void RegisterSynthCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::synth
