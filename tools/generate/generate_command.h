// `kvtier generate`: one request through the bundled engine, no daemon: loads a Hugging Face model
// directory, encodes the prompt (optionally through the chat template), prefills, and streams the
// decoded text to stdout as each token is chosen. The CPU backend only in this build.
#pragma once

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::generate {

// Adds the `generate` subcommand to `app`; exit code to *exit_code: 0 generated, 1 the model or
// the prompt could not be used (the message names the file or the limit), 2 bad flags (including
// --device gpu, which this build cannot run).
void RegisterGenerateCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::generate
