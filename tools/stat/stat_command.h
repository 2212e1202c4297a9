// `kvtier stat`: one screen on a running kvtierd from its metrics endpoint (and, with --socket,
// the protocol's Stats op); --watch refreshes it.
#pragma once

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::stat {

// Adds the `stat` subcommand to `app`; exit code to *exit_code: 0 shown, 1 the daemon could not
// be read (the message names the address), 2 bad flags.
void RegisterStatCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::stat
