// `kvtier serve`: an OpenAI-compatible HTTP server over the bundled engine (docs/engine.md
// "Serving"). Loads a Hugging Face model directory on the GPU or CPU backend, starts the engine
// thread (engine_worker.h) and the HTTP server (http_server.h), prints one
// "kvtier serve: serving MODEL on http://HOST:PORT ..." line on stdout when it accepts requests,
// and runs until SIGINT or SIGTERM.
#pragma once

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::serve {

// Adds the `serve` subcommand to `app`; exit code to *exit_code: 0 stopped by a signal, 1 the
// model could not be loaded or the address not bound (the message names it), 2 bad flags.
void RegisterServeCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::serve
