// `kvtier bench`: a load generator for a running kvtierd (docs/benchmarks.md "Daemon protocol").
#pragma once

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::bench {

// Adds the `bench` subcommand to `app`; exit code to *exit_code: 0 ran, 1 the run failed
// (daemon unreachable, a worker died), 2 bad flags.
void RegisterBenchCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::bench
