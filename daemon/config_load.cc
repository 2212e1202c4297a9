// LoadConfig: the TOML file, then the command-line overrides, through the same key table.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "daemon/config.h"
#include "daemon/config_internal.h"
#include "daemon/config_schema.h"
#include "daemon/config_values.h"

namespace kvtier {
namespace {

struct Problem {
  size_t line;
  std::string text;
};

bool IsSection(std::string_view name) {
  for (const ConfigSection& s : ConfigSections()) {
    if (s.name == name) return true;
  }
  return false;
}

// "unknown key 'x' in [t1] (known: a, b)" or "unknown key 'x'".
std::string UnknownKey(const std::string& name) {
  const std::string_view section = SectionOf(name);
  std::vector<std::string> known;
  for (const ConfigKey& k : ConfigKeys()) {
    if (SectionOf(k.name) == section) known.push_back(k.name.substr(section.size() + 1));
  }
  if (section.empty() || !IsSection(section)) {
    return fmt::format("{}: unknown key (sections: daemon, metrics, pool, index, t1, t2)", name);
  }
  return fmt::format("{}: unknown key in [{}] (known: {})", name, section, fmt::join(known, ", "));
}

class FileLoader {
 public:
  FileLoader(std::string path, DaemonConfig* config) : path_(std::move(path)), config_(config) {}

  // Sets every key of `table` (under `prefix`), noting every problem.
  void Walk(const toml::table& table, const std::string& prefix) {
    for (auto&& [k, v] : table) {
      const std::string name =
          prefix.empty() ? std::string(k.str()) : fmt::format("{}.{}", prefix, k.str());
      const size_t line = v.source().begin.line;
      if (k.str().find('.') != std::string_view::npos) {
        Note(line, fmt::format("\"{}\": a quoted key with a dot; write the section and key apart "
                               "([t1] then capacity_bytes = ...)",
                               k.str()));
        continue;
      }
      if (v.is_table()) {
        if (IsSection(name)) {
          Walk(*v.as_table(), name);
        } else {
          Note(line, fmt::format("[{}]: unknown section", name));
        }
        continue;
      }
      const ConfigKey* key = FindConfigKey(name);
      if (key == nullptr) {
        Note(line, IsSection(name) ? fmt::format("{}: is a section ([{}]), not a value", name, name)
                                   : UnknownKey(name));
        continue;
      }
      if (absl::Status s = key->set(v, *config_); !s.ok()) {
        Note(line, fmt::format("{}: {}", name, std::string(s.message())));
      }
      config_->origins[name] = fmt::format("{}:{}", path_, line);
    }
  }

  void Note(size_t line, std::string text) { problems_.push_back({line, std::move(text)}); }

  // OK, or every problem in line order, one per line, each "path:line: ...".
  absl::Status Result() {
    if (problems_.empty()) return absl::OkStatus();
    std::stable_sort(problems_.begin(), problems_.end(),
                     [](const Problem& a, const Problem& b) { return a.line < b.line; });
    std::vector<std::string> lines;
    for (const Problem& p : problems_)
      lines.push_back(fmt::format("{}:{}: {}", path_, p.line, p.text));
    return absl::InvalidArgumentError(fmt::format("{}", fmt::join(lines, "\n")));
  }

 private:
  const std::string path_;
  DaemonConfig* const config_;
  std::vector<Problem> problems_;
};

absl::Status LoadFile(const std::string& path, DaemonConfig* config) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(
        fmt::format("{}:{}: {}", path, e.source().begin.line, e.description()));
  }
  FileLoader loader(path, config);
  loader.Walk(table, "");
  return loader.Result();
}

// `text` as a TOML value of the form `key` reads from the command line (config_schema.h CliForm).
absl::StatusOr<toml::table> ToValue(const ConfigKey& key, const std::string& text) {
  toml::table holder;
  const bool toml_list = key.cli_form == CliForm::kList && text.starts_with('[');
  if (key.cli_form == CliForm::kValue || toml_list) {
    try {
      holder = toml::parse("v = " + text);
      if (holder.size() == 1 && holder.contains("v")) return holder;
    } catch (const toml::parse_error& e) {
      if (toml_list) return absl::InvalidArgumentError(std::string(e.description()));
    }
    holder = toml::table();
  }
  if (key.cli_form == CliForm::kList) {
    toml::array items;
    for (const std::string& item : config::SplitNames(text)) items.push_back(item);
    holder.insert("v", std::move(items));
  } else {
    holder.insert("v", text);
  }
  return holder;
}

absl::Status ApplyOverride(const ConfigOverride& o, DaemonConfig* config) {
  const ConfigKey* key = FindConfigKey(o.key);
  if (key == nullptr)
    return absl::InvalidArgumentError(fmt::format("{}: {}", o.origin, UnknownKey(o.key)));
  absl::StatusOr<toml::table> holder = ToValue(*key, o.value);
  absl::Status s = holder.ok() ? key->set(*holder->get("v"), *config) : holder.status();
  if (!s.ok())
    return absl::InvalidArgumentError(
        fmt::format("{}: {}: {}", o.origin, o.key, std::string(s.message())));
  config->origins[o.key] = o.origin;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path,
                                        const std::vector<ConfigOverride>& overrides) {
  DaemonConfig config;
  if (!path.empty()) KVTIER_RETURN_IF_ERROR(LoadFile(path, &config));
  for (const ConfigOverride& o : overrides) KVTIER_RETURN_IF_ERROR(ApplyOverride(o, &config));
  KVTIER_RETURN_IF_ERROR(LocateError(config, config::ResolveIds(&config)));
  KVTIER_RETURN_IF_ERROR(LocateError(config, ValidateConfig(config)));
  return config;
}

absl::Status LocateError(const DaemonConfig& config, const absl::Status& status) {
  if (status.ok()) return status;
  const std::string message(status.message());
  std::string key = message.substr(0, message.find(": "));
  key = key.substr(0, key.find('['));  // t2.directories[0] was set as t2.directories
  const auto it = config.origins.find(key);
  if (it == config.origins.end()) return status;
  return absl::Status(status.code(), fmt::format("{}: {}", it->second, message));
}

}  // namespace kvtier
