// `kvtier serve-bench`: replays a request trace against a running `kvtier serve` (or any server of
// the same OpenAI completions API with token-id prompts, `ignore_eos` and usage.cached_tokens) at
// the trace's arrival times and reports what the server did (docs/engine.md "Serving benchmark").
#pragma once

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::serve_bench {

// Adds the `serve-bench` subcommand to `app`; exit code to *exit_code: 0 every request succeeded,
// 1 the run could not start (a bad trace line names file:line; the server not reachable), 2 bad
// flags, 3 the run finished but some requests failed (the report counts them by kind).
void RegisterServeBenchCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::serve_bench
