// `kvtier replay`: runs the daemon's index and policies over a request trace with simulated tiers.
#pragma once

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::replay {

// Adds the `replay` subcommand to `app`. When it runs, its process exit code is stored in
// *exit_code (0 success, 1 a runtime error such as a malformed trace, 2 bad arguments), and errors
// are printed to stderr naming the file, line and what was wrong.
void RegisterReplayCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::replay
