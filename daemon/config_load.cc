// LoadConfig: the TOML file, then the command-line overrides, through the same key table.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <tuple>
#include <utility>

#include "daemon/config.h"
#include "daemon/config_internal.h"
#include "daemon/config_schema.h"
#include "daemon/config_values.h"

namespace kvtier {
namespace {

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

// "<key>: <message>", or the message alone when it names an entry of the key already
// ("pools[1].name: ...").
std::string Named(const std::string& key, const absl::Status& status) {
  const std::string message(status.message());
  return message.starts_with(key + "[") ? message : fmt::format("{}: {}", key, message);
}

class FileLoader {
 public:
  FileLoader(std::string path, DaemonConfig* config, config::Problems* problems)
      : path_(std::move(path)), config_(config), problems_(problems) {}

  // Sets every key of `table` (under `prefix`), noting every problem.
  void Walk(const toml::table& table, const std::string& prefix) {
    for (auto&& [k, v] : table) {
      const std::string name =
          prefix.empty() ? std::string(k.str()) : fmt::format("{}.{}", prefix, k.str());
      const size_t line = v.source().begin.line;
      if (k.str().find('.') != std::string_view::npos) {
        Note(line, name,
             fmt::format("\"{}\": a quoted key with a dot; write the section and key apart "
                         "([t1] then capacity_bytes = ...)",
                         k.str()));
        continue;
      }
      if (v.is_table()) {
        if (IsSection(name)) {
          Walk(*v.as_table(), name);
        } else {
          Note(line, name, fmt::format("[{}]: unknown section", name));
        }
        continue;
      }
      const ConfigKey* key = FindConfigKey(name);
      if (key == nullptr) {
        Note(line, name,
             IsSection(name) ? fmt::format("{}: is a section ([{}]), not a value", name, name)
                             : UnknownKey(name));
        continue;
      }
      if (absl::Status s = key->set(v, *config_); !s.ok()) {
        Note(line, name, Named(name, s));
      }
      config_->origins[name] = fmt::format("{}:{}", path_, line);
    }
  }

 private:
  void Note(size_t line, const std::string& key, std::string text) {
    problems_->AddRead(fmt::format("{}:{}", path_, line), key, std::move(text));
  }

  const std::string path_;
  DaemonConfig* const config_;
  config::Problems* const problems_;
};

// What kind of file system object `mode` is, for an error that says why it is not a config file.
std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// OK when `path` is a regular file (or a link to one) this process may read. Anything else would
// otherwise read as an empty file (a directory) or block (a FIFO) and start on the defaults.
absl::Status CheckConfigFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: cannot read the config file: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: is {}; --config takes a readable regular file", path, KindOf(st.st_mode)));
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: cannot read the config file: {}", path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Reads the file into `config`, noting each key's problem in `problems`. An error only when the
// file cannot be read or is not TOML: then nothing of it can be judged.
absl::Status LoadFile(const std::string& path, DaemonConfig* config, config::Problems* problems) {
  KVTIER_RETURN_IF_ERROR(CheckConfigFile(path));
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(
        fmt::format("{}:{}: {}", path, e.source().begin.line, e.description()));
  }
  FileLoader(path, config, problems).Walk(table, "");
  return absl::OkStatus();
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

void ApplyOverride(const ConfigOverride& o, DaemonConfig* config, config::Problems* problems) {
  const ConfigKey* key = FindConfigKey(o.key);
  if (key == nullptr) {
    problems->AddRead(o.origin, o.key, UnknownKey(o.key));
    return;
  }
  absl::StatusOr<toml::table> holder = ToValue(*key, o.value);
  absl::Status s = holder.ok() ? key->set(*holder->get("v"), *config) : holder.status();
  if (!s.ok()) {
    problems->AddRead(o.origin, o.key, Named(o.key, s));
    return;
  }
  config->origins[o.key] = o.origin;
}

// The key a problem line is about: its text up to the first ": ", without an index
// ("t2.directories[0]" is about t2.directories).
std::string KeyOf(std::string_view line) {
  std::string_view key = line.substr(0, line.find(": "));
  return std::string(key.substr(0, key.find('[')));
}

// Where the key `line` is about was set; else where the first other key it names was set (a
// cross-field problem of a key left at its default, e.g. "t1.low_watermark: 0.9 is above
// t1.high_watermark (0.5)" with only the high one in the file); else "".
std::string OriginOf(const DaemonConfig& config, std::string_view line) {
  if (auto it = config.origins.find(KeyOf(line)); it != config.origins.end()) return it->second;
  size_t best = line.npos;
  std::string origin;
  for (const auto& [key, where] : config.origins) {
    const size_t at = line.find(key);
    if (at < best) {
      best = at;
      origin = where;
    }
  }
  return origin;
}

}  // namespace

namespace config {

void Problems::Add(const std::string& where, std::string text, absl::StatusCode code) {
  Problem p{2, problems_.size(), std::move(text), code};
  if (!where.empty()) {
    p.text = fmt::format("{}: {}", where, p.text);
    p.rank = 1;
    const std::string_view rest =
        std::string_view(where).substr(std::min(where.size(), file_.size() + 1));
    if (!file_.empty() && where.starts_with(file_ + ":") && !rest.empty() &&
        rest.find_first_not_of("0123456789") == rest.npos) {
      p.rank = 0;
      p.line = std::stoul(std::string(rest));
    }
  }
  problems_.push_back(std::move(p));
}

void Problems::AddRead(const std::string& where, const std::string& key, std::string text) {
  read_failed_.insert(key);
  Add(where, std::move(text), absl::StatusCode::kInvalidArgument);
}

void Problems::AddLocated(const DaemonConfig& config, const absl::Status& status) {
  if (status.ok()) return;
  const std::string message(status.message());
  std::string_view rest = message;
  while (!rest.empty()) {
    const std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    if (line.empty() || read_failed_.contains(KeyOf(line))) continue;
    Add(OriginOf(config, line), std::string(line), status.code());
  }
}

absl::Status Problems::Result() const {
  if (problems_.empty()) return absl::OkStatus();
  std::vector<Problem> sorted = problems_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Problem& a, const Problem& b) {
    return std::tie(a.rank, a.line) < std::tie(b.rank, b.line);
  });
  std::vector<std::string> lines;
  for (const Problem& p : sorted) lines.push_back(p.text);
  return absl::Status(sorted.front().code, fmt::format("{}", fmt::join(lines, "\n")));
}

}  // namespace config

absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path,
                                        const std::vector<ConfigOverride>& overrides) {
  DaemonConfig config;
  config::Problems problems(path);
  if (!path.empty()) KVTIER_RETURN_IF_ERROR(LoadFile(path, &config, &problems));
  for (const ConfigOverride& o : overrides) ApplyOverride(o, &config, &problems);
  problems.AddLocated(config, config::ResolveIds(&config));
  problems.AddLocated(config, ValidateConfig(config));
  // A config that fails anyway also gets the directory checks start would make, so that one run
  // shows every problem; a good one is not checked against this machine's disks here (it may be
  // meant for another host: --print-config, --check-config elsewhere).
  if (!problems.empty()) problems.AddLocated(config, config::CheckDirectories(config));
  KVTIER_RETURN_IF_ERROR(problems.Result());
  return config;
}

absl::Status LocateError(const DaemonConfig& config, const absl::Status& status) {
  if (status.ok()) return status;
  config::Problems located("");
  located.AddLocated(config, status);
  return located.Result();
}

}  // namespace kvtier
