#include "daemon/cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <list>
#include <map>

#include "daemon/config_schema.h"

namespace kvtier {
namespace {

constexpr const char* kDescription =
    "kvtierd: the tiered KV-cache daemon (GPU HBM, pinned host DRAM, NVMe).\n"
    "Settings come from --config FILE (TOML), then from the flags below in order; every key of\n"
    "the file is also a flag. docs/configuration.md describes them.";

// The options whose values become overrides, and where each one's values go.
struct KeyFlag {
  std::string key;
  std::vector<std::string> values;
};
struct OverrideFlags {
  CLI::Option* set = nullptr;
  std::vector<std::string> set_values;
  CLI::Option* record = nullptr;
  std::vector<std::string> record_values;
  std::list<KeyFlag> storage;  // stable addresses: CLI11 keeps pointers to `values`
  std::map<const CLI::Option*, const KeyFlag*> keys;
};

void AddKeyFlags(CLI::App& app, OverrideFlags* flags) {
  const DaemonConfig defaults;
  for (const ConfigKey& key : ConfigKeys()) {
    KeyFlag& flag = flags->storage.emplace_back(KeyFlag{key.name, {}});
    CLI::Option* opt = app.add_option("--" + key.name, flag.values,
                                      fmt::format("{} (default: {})", key.doc, key.get(defaults)))
                           ->option_text(key.type)
                           ->allow_extra_args(false)
                           ->group("Settings (also keys of the config file)");
    flags->keys[opt] = &flag;
  }
}

// Splits "KEY=VALUE" from --set.
absl::StatusOr<ConfigOverride> ParseSet(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == text.npos || eq == 0) {
    return absl::InvalidArgumentError(
        fmt::format("--set {}: expected KEY=VALUE, e.g. --set t1.capacity_bytes=2GiB", text));
  }
  const std::string key = text.substr(0, eq);
  return ConfigOverride{key, text.substr(eq + 1), "--set " + key};
}

// The overrides in command-line order (CLI11's parse_order lists one entry per occurrence).
absl::StatusOr<std::vector<ConfigOverride>> Ordered(const CLI::App& app, const OverrideFlags& f) {
  std::vector<ConfigOverride> out;
  std::map<const CLI::Option*, size_t> used;
  for (const CLI::Option* opt : app.parse_order()) {
    const size_t i = used[opt]++;
    if (opt == f.set) {
      KVTIER_ASSIGN_OR_RETURN(ConfigOverride o, ParseSet(f.set_values.at(i)));
      out.push_back(std::move(o));
    } else if (opt == f.record) {
      out.push_back({"daemon.record_file", f.record_values.at(i), "--record"});
    } else if (auto it = f.keys.find(opt); it != f.keys.end()) {
      const KeyFlag& flag = *it->second;
      out.push_back({flag.key, flag.values.at(i), "--" + flag.key});
    }
  }
  return out;
}

}  // namespace

std::optional<int> ParseKvtierdArgs(int argc, char** argv, KvtierdArgs* args) {
  CLI::App app{kDescription, "kvtierd"};
  app.add_option("--config,-c", args->config_path, "TOML config file (default: none, the defaults)")
      ->option_text("FILE");
  app.add_flag("--check-config", args->check_config,
               "Load and validate the config, create the data directory as the daemon would, exit "
               "(0: good, 2: bad, the message names file, line and key)");
  app.add_flag("--print-config", args->print_config, "Print the effective config as TOML and exit");
  app.add_flag("--help-config-markdown", args->help_config_markdown,
               "Print the key reference of docs/configuration.md and exit");
  OverrideFlags flags;
  flags.set =
      app.add_option("--set", flags.set_values, "Set any key, e.g. --set t1.capacity_bytes=2GiB")
          ->option_text("KEY=VALUE")
          ->allow_extra_args(false);
  flags.record = app.add_option("--record", flags.record_values,
                                "Record every lookup to FILE (same as --daemon.record_file)")
                     ->option_text("FILE")
                     ->allow_extra_args(false);
  AddKeyFlags(app, &flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, std::cout, std::cerr);
    return code == 0 ? 0 : 2;
  }
  absl::StatusOr<std::vector<ConfigOverride>> overrides = Ordered(app, flags);
  if (!overrides.ok()) {
    std::cerr << "kvtierd: " << overrides.status().message() << "\n";
    return 2;
  }
  args->overrides = std::move(*overrides);
  return std::nullopt;
}

}  // namespace kvtier
