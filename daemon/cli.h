// kvtierd's command line. Every config key is also a flag (--t1.capacity_bytes 2GiB), and
// --set KEY=VALUE sets any key; both go through the same readers as the file (config_schema.h)
// and are applied after it, in command-line order. --help lists every key with its type, default
// and doc, from the key table.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/config.h"

namespace kvtier {

struct KvtierdArgs {
  std::string config_path;  // empty: the defaults
  std::vector<ConfigOverride> overrides;
  bool check_config = false;          // validate, prepare directories, exit
  bool print_config = false;          // print the effective config as TOML, exit
  bool help_config_markdown = false;  // print the key reference (docs/configuration.md), exit
};

// Parses argv into `args`. Returns the exit code when the process should stop now: 0 after
// --help (printed to stdout), 2 after a usage error (printed to stderr, naming the flag).
std::optional<int> ParseKvtierdArgs(int argc, char** argv, KvtierdArgs* args);

}  // namespace kvtier
