#include "daemon/config_values.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>

namespace kvtier::config {
namespace {

struct Unit {
  const char* suffix;
  uint64_t bytes;
};
// Largest first, so FormatSize picks the largest unit that divides the value.
constexpr Unit kUnits[] = {
    {"TiB", uint64_t{1} << 40},
    {"GiB", uint64_t{1} << 30},
    {"MiB", uint64_t{1} << 20},
    {"KiB", uint64_t{1} << 10},
    {"B", 1},
};

std::string TypeName(const toml::node& value) {
  switch (value.type()) {
    case toml::node_type::string:
      return fmt::format("the string {}", Quote(*value.value<std::string>()));
    case toml::node_type::integer:
      return fmt::format("the integer {}", *value.value<int64_t>());
    case toml::node_type::floating_point:
      return fmt::format("the number {}", *value.value<double>());
    case toml::node_type::boolean:
      return fmt::format("the boolean {}", *value.value<bool>() ? "true" : "false");
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

absl::Status Expected(const std::string& what, const toml::node& value) {
  return absl::InvalidArgumentError(fmt::format("expected {}, got {}", what, TypeName(value)));
}

absl::Status NotASize(std::string_view text) {
  return absl::InvalidArgumentError(fmt::format(
      "'{}' is not a size; use e.g. 8GiB or 8589934592 (units: B, KiB, MiB, GiB, TiB)", text));
}

// `digits` (all decimal digits, possibly empty) as a number; false on overflow.
bool ParseDigits(std::string_view digits, unsigned __int128* out) {
  unsigned __int128 v = 0;
  for (char c : digits) {
    v = v * 10 + static_cast<unsigned>(c - '0');
    if (v > std::numeric_limits<uint64_t>::max()) return false;
  }
  *out = v;
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

absl::StatusOr<uint64_t> ParseSizeText(std::string_view text) {
  const std::string_view t = Trim(text);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  const std::string_view number = t.substr(0, i);
  const std::string_view unit = Trim(t.substr(i));
  const size_t dot = number.find('.');
  const std::string_view whole = number.substr(0, dot);
  const std::string_view frac = dot == number.npos ? "" : number.substr(dot + 1);
  unsigned __int128 w = 0, f = 0, scale = 0;
  if (whole.empty() || frac.find('.') != frac.npos || !ParseDigits(whole, &w) || frac.size() > 18 ||
      !ParseDigits(frac, &f)) {
    return NotASize(text);
  }
  for (const Unit& u : kUnits) {
    if (unit == u.suffix) scale = u.bytes;
  }
  if (unit.empty() && frac.empty()) scale = 1;
  if (scale == 0) return NotASize(text);
  unsigned __int128 pow10 = 1;
  for (size_t k = 0; k < frac.size(); ++k) pow10 *= 10;
  const unsigned __int128 bytes = w * scale + f * scale / pow10;
  if (f * scale % pow10 != 0) {
    return absl::InvalidArgumentError(fmt::format("'{}' is not a whole number of bytes", text));
  }
  if (bytes > std::numeric_limits<uint64_t>::max()) {
    return absl::InvalidArgumentError(fmt::format("'{}' is too large", text));
  }
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<uint64_t> ReadSize(const toml::node& value) {
  if (const auto s = value.value_exact<std::string>()) return ParseSizeText(*s);
  if (value.is_integer()) return ReadUint(value, std::numeric_limits<uint64_t>::max());
  return Expected("a size (an integer of bytes, or a string such as \"8GiB\")", value);
}

absl::StatusOr<uint64_t> ReadUint(const toml::node& value, uint64_t max) {
  const auto v = value.value_exact<int64_t>();
  if (!v) return Expected("an integer", value);
  if (*v < 0 || static_cast<uint64_t>(*v) > max) {
    return absl::InvalidArgumentError(fmt::format("{} is not in [0, {}]", *v, max));
  }
  return static_cast<uint64_t>(*v);
}

absl::StatusOr<double> ReadDouble(const toml::node& value) {
  if (const auto d = value.value_exact<double>()) return *d;
  if (const auto i = value.value_exact<int64_t>()) return static_cast<double>(*i);
  return Expected("a number", value);
}

absl::StatusOr<bool> ReadBool(const toml::node& value) {
  if (const auto b = value.value_exact<bool>()) return *b;
  return Expected("true or false", value);
}

absl::StatusOr<std::string> ReadString(const toml::node& value) {
  if (auto s = value.value_exact<std::string>()) return std::move(*s);
  return Expected("a string", value);
}

absl::StatusOr<std::string> ReadChoice(const toml::node& value,
                                       const std::vector<std::string>& choices) {
  KVTIER_ASSIGN_OR_RETURN(std::string s, ReadString(value));
  for (const std::string& c : choices) {
    if (s == c) return s;
  }
  return absl::InvalidArgumentError(
      fmt::format("'{}' is not one of {}", s, fmt::join(choices, ", ")));
}

absl::StatusOr<std::vector<std::string>> ReadStringList(const toml::node& value) {
  const toml::array* array = value.as_array();
  if (array == nullptr) return Expected("an array of strings", value);
  std::vector<std::string> out;
  for (const toml::node& item : *array) {
    auto s = item.value_exact<std::string>();
    if (!s) return Expected(fmt::format("strings in the array (item {})", out.size()), item);
    out.push_back(std::move(*s));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ReadIdList(const toml::node& value) {
  const toml::array* array = value.as_array();
  if (array == nullptr) return Expected("an array of names or numeric ids", value);
  std::vector<std::string> out;
  for (const toml::node& item : *array) {
    if (const auto id = item.value_exact<int64_t>(); id && *id >= 0) {
      out.push_back(std::to_string(*id));
    } else if (auto s = item.value_exact<std::string>(); s && !s->empty()) {
      out.push_back(std::move(*s));
    } else {
      return Expected(fmt::format("a name or an id >= 0 (item {})", out.size()), item);
    }
  }
  return out;
}

absl::StatusOr<uint32_t> ReadMode(const toml::node& value) {
  uint64_t mode = 0;
  if (const auto s = value.value_exact<std::string>()) {
    if (s->empty() || s->size() > 4 || s->find_first_not_of("01234567") != s->npos) {
      return absl::InvalidArgumentError(
          fmt::format("'{}' is not an octal file mode such as \"0660\"", *s));
    }
    mode = std::stoul(*s, nullptr, 8);
  } else {
    KVTIER_ASSIGN_OR_RETURN(mode, ReadUint(value, std::numeric_limits<uint32_t>::max()));
  }
  if (mode > 0777) {
    return absl::InvalidArgumentError(
        fmt::format("{:04o} has bits beyond the permission bits 0777", mode));
  }
  return static_cast<uint32_t>(mode);
}

std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04X}", static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string FormatSize(uint64_t bytes) {
  for (const Unit& u : kUnits) {
    if (bytes != 0 && u.bytes > 1 && bytes % u.bytes == 0) {
      return Quote(fmt::format("{}{}", bytes / u.bytes, u.suffix));
    }
  }
  // TOML integers are signed 64-bit; larger sizes stay exact as strings.
  if (bytes > uint64_t{std::numeric_limits<int64_t>::max()}) return Quote(std::to_string(bytes));
  return std::to_string(bytes);
}

std::string FormatDouble(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", value);
  if (s.find_first_of(".e") == s.npos) s += ".0";
  return s;
}

std::string FormatBool(bool value) { return value ? "true" : "false"; }

std::string FormatList(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& s : items) quoted.push_back(Quote(s));
  return fmt::format("[{}]", fmt::join(quoted, ", "));
}

std::string FormatMode(uint32_t mode) { return Quote(fmt::format("{:04o}", mode)); }

std::vector<std::string> SplitNames(std::string_view names) {
  std::vector<std::string> out;
  while (!names.empty()) {
    const size_t comma = names.find(',');
    const std::string_view name = Trim(names.substr(0, comma));
    if (!name.empty()) out.emplace_back(name);
    names = comma == names.npos ? std::string_view() : names.substr(comma + 1);
  }
  return out;
}

}  // namespace kvtier::config
