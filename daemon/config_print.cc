// --print-config and the key reference of docs/configuration.md, both from the key table.
#include <fmt/format.h>

#include "daemon/config.h"
#include "daemon/config_schema.h"

namespace kvtier {
namespace {

constexpr const char* kHeader =
    "# kvtierd configuration (TOML). Every key is listed with its value, its type and one line\n"
    "# of doc; docs/configuration.md says more. `kvtierd --print-config` prints the effective\n"
    "# configuration in this form, and configs/default.toml is what it prints for the defaults.\n"
    "# Relative paths are relative to the daemon's working directory.\n";

std::string Escaped(std::string_view cell) {
  std::string out;
  for (const char c : cell) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string PrintConfig(const DaemonConfig& config) {
  std::string out = kHeader;
  // Keys of the top level (pools) come before the first [section], as TOML wants.
  for (const ConfigKey& key : ConfigKeys()) {
    if (!SectionOf(key.name).empty()) continue;
    out += fmt::format("\n# {} ({})\n{} = {}\n", key.doc, key.type, key.name, key.get(config));
  }
  for (const ConfigSection& section : ConfigSections()) {
    out += fmt::format("\n# {}\n[{}]\n", section.doc, section.name);
    for (const ConfigKey& key : ConfigKeys()) {
      if (SectionOf(key.name) != section.name) continue;
      out += fmt::format("# {} ({})\n{} = {}\n", key.doc, key.type,
                         key.name.substr(section.name.size() + 1), key.get(config));
    }
  }
  return out;
}

std::string ConfigMarkdown() {
  const DaemonConfig defaults;
  std::string out =
      "### Top level\n\nKeys before the first section.\n\n| key | type | default | meaning |\n"
      "| --- | --- | --- | --- |\n";
  for (const ConfigKey& key : ConfigKeys()) {
    if (!SectionOf(key.name).empty()) continue;
    out += fmt::format("| `{}` | {} | `{}` | {} |\n", key.name, Escaped(key.type),
                       Escaped(key.get(defaults)), Escaped(key.doc));
  }
  out += "\n";
  for (const ConfigSection& section : ConfigSections()) {
    out += fmt::format(
        "### [{}]\n\n{}\n\n| key | type | default | meaning |\n| --- | --- | --- | --- |\n",
        section.name, section.doc);
    for (const ConfigKey& key : ConfigKeys()) {
      if (SectionOf(key.name) != section.name) continue;
      out += fmt::format("| `{}` | {} | `{}` | {} |\n", key.name, Escaped(key.type),
                         Escaped(key.get(defaults)), Escaped(key.doc));
    }
    out += "\n";
  }
  return out;
}

}  // namespace kvtier
