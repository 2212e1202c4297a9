// `kvtier stat`: one screen on a running kvtierd from its metrics endpoint (and, with --socket,
// the protocol's Stats op); --watch refreshes it.
#pragma once

#include <CLI/CLI.hpp>

namespace kvtier::stat {

// Adds the `stat` subcommand to `app`; exit code to *exit_code: 0 shown, 1 the daemon could not
// be read (the message names the address), 2 bad flags.
void RegisterStatCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::stat
