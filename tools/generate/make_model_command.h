// `kvtier make-model`: writes a Hugging Face model directory with random weights at a real
// architecture (tools/generate/random_model.h) so `kvtier generate` can be tried without weights.
// The text such a model generates is meaningless; the command says so.
#pragma once

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::generate {

// Adds the `make-model` subcommand to `app`; exit code to *exit_code: 0 written, 1 the tokenizer
// could not be read or a file not written (the message names it), 2 bad flags.
void RegisterMakeModelCommand(CLI::App& app, int* exit_code);

}  // namespace kvtier::generate
