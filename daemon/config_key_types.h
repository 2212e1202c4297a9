// Internal to config_schema.cc: factories of ConfigKey entries, one per value type. Each takes
// a KVTIER_FIELD(...) accessor and builds the key's reader and printer around it.
#pragma once

#include <fmt/format.h>

#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "daemon/config_schema.h"
#include "daemon/config_values.h"

namespace kvtier::config {

// A field of DaemonConfig, reachable from a const or a mutable config alike.
#define KVTIER_FIELD(expr) \
  [](auto& c) -> auto& { return c.expr; }

template <typename F>
using FieldType = std::remove_cvref_t<decltype(std::declval<F>()(std::declval<DaemonConfig&>()))>;

template <typename F>
ConfigKey Size(std::string name, std::string doc, F field) {
  using T = FieldType<F>;
  return {std::move(name),
          "size",
          std::move(doc),
          CliForm::kValue,
          [field](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(const uint64_t bytes, config::ReadSize(v));
            if (bytes > std::numeric_limits<T>::max()) {
              return absl::InvalidArgumentError(
                  fmt::format("{} bytes is more than this setting holds ({})", bytes,
                              std::numeric_limits<T>::max()));
            }
            field(c) = static_cast<T>(bytes);
            return absl::OkStatus();
          },
          [field](const DaemonConfig& c) { return FormatSize(field(c)); }};
}

template <typename F>
ConfigKey Uint(std::string name, std::string doc, F field) {
  using T = FieldType<F>;
  return {std::move(name),
          "integer",
          std::move(doc),
          CliForm::kValue,
          [field](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(const uint64_t value,
                                    config::ReadUint(v, std::numeric_limits<T>::max()));
            field(c) = static_cast<T>(value);  // ReadUint refused values above T's max.
            return absl::OkStatus();
          },
          [field](const DaemonConfig& c) { return std::to_string(field(c)); }};
}

template <typename F>
ConfigKey Fraction(std::string name, std::string type, std::string doc, F field) {
  return {std::move(name),
          std::move(type),
          std::move(doc),
          CliForm::kValue,
          [field](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(field(c), config::ReadDouble(v));
            return absl::OkStatus();
          },
          [field](const DaemonConfig& c) { return FormatDouble(field(c)); }};
}

template <typename F>
ConfigKey Bool(std::string name, std::string doc, F field) {
  return {std::move(name),
          "bool",
          std::move(doc),
          CliForm::kValue,
          [field](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(field(c), config::ReadBool(v));
            return absl::OkStatus();
          },
          [field](const DaemonConfig& c) { return FormatBool(field(c)); }};
}

template <typename F>
ConfigKey Text(std::string name, std::string doc, F field) {
  return {std::move(name),
          "string",
          std::move(doc),
          CliForm::kText,
          [field](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(field(c), config::ReadString(v));
            return absl::OkStatus();
          },
          [field](const DaemonConfig& c) { return Quote(field(c)); }};
}

template <typename F>
ConfigKey Choice(std::string name, std::vector<std::string> choices, std::string doc, F field) {
  std::string type = fmt::format("{}", fmt::join(choices, " | "));
  return {std::move(name),
          std::move(type),
          std::move(doc),
          CliForm::kText,
          [field, choices](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(field(c), config::ReadChoice(v, choices));
            return absl::OkStatus();
          },
          [field](const DaemonConfig& c) { return Quote(field(c)); }};
}

// A choice stored as an enum: `names` maps each spelling to its value.
template <typename F, typename E = FieldType<F>>
ConfigKey Enum(std::string name, std::vector<std::pair<std::string, E>> names, std::string doc,
               F field) {
  std::vector<std::string> choices;
  for (const auto& [spelling, value] : names) choices.push_back(spelling);
  std::string type = fmt::format("{}", fmt::join(choices, " | "));
  return {std::move(name),
          std::move(type),
          std::move(doc),
          CliForm::kText,
          [field, names, choices](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(const std::string s, config::ReadChoice(v, choices));
            for (const auto& [spelling, value] : names) {
              if (s == spelling) field(c) = value;
            }
            return absl::OkStatus();
          },
          [field, names](const DaemonConfig& c) {
            for (const auto& [spelling, value] : names) {
              if (field(c) == value) return Quote(spelling);
            }
            return Quote("?");
          }};
}

template <typename F>
ConfigKey List(std::string name, std::string type, std::string doc, F field, bool ids) {
  return {std::move(name),
          std::move(type),
          std::move(doc),
          CliForm::kList,
          [field, ids](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(field(c),
                                    ids ? config::ReadIdList(v) : config::ReadStringList(v));
            return absl::OkStatus();
          },
          [field](const DaemonConfig& c) { return FormatList(field(c)); }};
}

inline ConfigKey Mode(std::string name, std::string doc) {
  return {std::move(name),
          "octal file mode",
          std::move(doc),
          CliForm::kText,
          [](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(c.daemon.socket_mode, config::ReadMode(v));
            return absl::OkStatus();
          },
          [](const DaemonConfig& c) { return FormatMode(c.daemon.socket_mode); }};
}

}  // namespace kvtier::config
