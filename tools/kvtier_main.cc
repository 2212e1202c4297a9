// `kvtier`: the operator's command line. Each subcommand lives in its own directory and registers
// itself here; see `kvtier --help`.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "tools/bench/bench_command.h"
#include "tools/generate/generate_command.h"
#include "tools/generate/make_model_command.h"
#include "tools/replay/replay_command.h"
#include "tools/serve/serve_command.h"
#include "tools/serve_bench/serve_bench_command.h"
#include "tools/stat/stat_command.h"
#include "tools/synth/synth_command.h"

int main(int argc, char** argv) {
  CLI::App app{
      "kvtier: tiered KV-cache tools (trace replay, workload synthesis, daemon stat and bench, "
      "the bundled engine: generate, make-model, serve)"};
  app.require_subcommand(1);

  int exit_code = 0;
  kvtier::replay::RegisterReplayCommand(app, &exit_code);
  kvtier::synth::RegisterSynthCommand(app, &exit_code);
  kvtier::stat::RegisterStatCommand(app, &exit_code);
  kvtier::bench::RegisterBenchCommand(app, &exit_code);
  kvtier::generate::RegisterGenerateCommand(app, &exit_code);
  kvtier::generate::RegisterMakeModelCommand(app, &exit_code);
  kvtier::serve::RegisterServeCommand(app, &exit_code);
  kvtier::serve_bench::RegisterServeBenchCommand(app, &exit_code);
  // CLI11 would only say "A subcommand is required" for a mistyped one; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    try {
      app.get_subcommand(argv[1]);
    } catch (const CLI::OptionNotFound&) {
      std::fprintf(stderr,
                   "kvtier: unknown command '%s' (commands: replay, synth, stat, bench, generate, "
                   "make-model, serve; see --help)\n",
                   argv[1]);
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every argument error exits 2, whichever CLI11 error it was.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
