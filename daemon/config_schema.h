// The one table of kvtierd's configuration keys (see config.h). Each entry knows its name, type,
// doc line, how to read a TOML value into a DaemonConfig and how to print it back; the file
// loader, the command-line flags, --print-config, --help and docs/configuration.md all iterate it.
#pragma once

#include <toml++/toml.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "daemon/config.h"

namespace kvtier {

// How a command-line value becomes a TOML value before it is set (see ToNode in config_load.cc).
enum class CliForm {
  kText,   // taken verbatim as a string ("lru", a path)
  kValue,  // a TOML value if it parses as one (2, 0.5, true), else a string ("2GiB")
  kList,   // a TOML array if it starts with '[', else comma-separated strings ("a,b")
};

struct ConfigKey {
  std::string name;  // "t1.capacity_bytes": section, then key
  std::string type;  // for help: "size", "fraction in (0, 1]", "lru | fifo | ..."
  std::string doc;   // one line
  CliForm cli_form = CliForm::kValue;
  // Reads `value` into the config. The error says what is wrong with the value, without the key
  // or place (the caller adds those).
  std::function<absl::Status(const toml::node& value, DaemonConfig& config)> set;
  // The current value as a TOML literal ("\"1GiB\"", "0.95", "[\"a\"]").
  std::function<std::string(const DaemonConfig& config)> get;
};

struct ConfigSection {
  std::string name;  // "t1", "t1.eviction"
  std::string doc;
};

// In print order: sections in order, each section's keys in order.
const std::vector<ConfigKey>& ConfigKeys();
const std::vector<ConfigSection>& ConfigSections();
// nullptr when `name` is not a key.
const ConfigKey* FindConfigKey(std::string_view name);
// The section a key belongs to: its name up to the last dot.
std::string_view SectionOf(std::string_view key_name);

}  // namespace kvtier
