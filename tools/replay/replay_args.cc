#include "tools/replay/replay_args.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"

namespace kvtier::replay {
namespace {

struct UnitScale {
  const char* suffix;
  double bytes;
};
// Longest suffixes first so "GiB" is not read as "B".
constexpr UnitScale kByteUnits[] = {
    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
    {"B", 1.0},
};

// The whole of `text` as a finite double >= 0, or nullopt.
std::optional<double> ParseNumber(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

absl::StatusOr<bool> ParseBool(const std::string& where, const std::string& text) {
  if (text.empty() || text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  return absl::InvalidArgumentError(
      fmt::format("{}: expected true or false, got '{}'", where, text));
}

// Applies one key=value of a tier spec.
absl::Status ApplyTierKey(const std::string& where, const std::string& key,
                          const std::string& value, TierSpec* spec, bool* has_capacity) {
  const std::string at = fmt::format("{}: {}", where, key);
  if (key == "name") {
    if (value.empty()) return absl::InvalidArgumentError(at + ": empty name");
    spec->config.name = value;
  } else if (key == "capacity") {
    KVTIER_ASSIGN_OR_RETURN(spec->capacity, ParseCapacity(at, value));
    *has_capacity = true;
  } else if (key == "policy") {
    KVTIER_RETURN_IF_ERROR(CheckPolicyName(at, value));
    spec->config.eviction.policy = value;
  } else if (key == "admission") {
    KVTIER_RETURN_IF_ERROR(CheckAdmissionName(at, value));
    spec->config.admission.policy = value;
  } else if (key == "admission_window" || key == "admission-window") {
    KVTIER_ASSIGN_OR_RETURN(spec->config.admission.window_blocks, ParseUint(at, value));
  } else if (key == "leaf_first" || key == "leaf-first") {
    KVTIER_ASSIGN_OR_RETURN(spec->config.leaf_first, ParseBool(at, value));
  } else if (key == "high_watermark" || key == "high-watermark") {
    KVTIER_ASSIGN_OR_RETURN(spec->config.high_watermark, ParsePositive(at, value));
  } else if (key == "low_watermark" || key == "low-watermark") {
    KVTIER_ASSIGN_OR_RETURN(spec->config.low_watermark, ParsePositive(at, value));
  } else if (key == "read_gbps" || key == "read-gbps") {
    KVTIER_ASSIGN_OR_RETURN(spec->read_gbps, ParsePositive(at, value));
  } else if (key == "latency_us" || key == "latency-us") {
    std::optional<double> v = ParseNumber(value);
    if (!v)
      return absl::InvalidArgumentError(at + ": expected microseconds >= 0, got '" + value + "'");
    spec->latency_us = *v;
  } else if (key == "climb_to" || key == "climb-to") {
    if (value.empty()) return absl::InvalidArgumentError(at + ": empty tier name");
    spec->climb_to = value;
  } else {
    return absl::InvalidArgumentError(
        fmt::format("{}: unknown key '{}' (known: name, capacity, policy, admission, "
                    "admission_window, leaf_first, high_watermark, low_watermark, read_gbps, "
                    "latency_us, climb_to)",
                    where, key));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Capacity> ParseCapacity(const std::string& where, const std::string& text) {
  const std::string t = Trim(text);
  Capacity c;
  std::string number = t;
  if (absl::EndsWith(t, "%")) {
    c.unit = Capacity::Unit::kFraction;
    number = t.substr(0, t.size() - 1);
  } else {
    for (const UnitScale& unit : kByteUnits) {
      if (absl::EndsWith(t, unit.suffix)) {
        c.unit = Capacity::Unit::kBytes;
        number = Trim(t.substr(0, t.size() - std::string(unit.suffix).size()));
        if (auto v = ParseNumber(number); v && *v > 0) c.value = *v * unit.bytes;
        break;
      }
    }
  }
  const std::optional<double> v = ParseNumber(number);
  const bool whole_blocks = c.unit != Capacity::Unit::kBlocks || (v && std::floor(*v) == *v);
  if (!v || *v <= 0 || !whole_blocks || (c.unit == Capacity::Unit::kFraction && *v > 100)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: bad capacity '{}' (a number of blocks, a size such as 10GiB or 512MB, or a percentage "
        "of unique blocks such as 5%)",
        where, text));
  }
  if (c.unit == Capacity::Unit::kBlocks) c.value = *v;
  if (c.unit == Capacity::Unit::kFraction) c.value = *v / 100.0;
  return c;
}

absl::StatusOr<uint64_t> ResolveCapacity(const std::string& where, const Capacity& capacity,
                                         uint64_t block_bytes, uint64_t unique_blocks) {
  double blocks = capacity.value;
  if (capacity.unit == Capacity::Unit::kBytes) {
    if (block_bytes == 0) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: a capacity in bytes needs the block size: give --model or --block-bytes", where));
    }
    blocks = std::floor(capacity.value / double(block_bytes));
  } else if (capacity.unit == Capacity::Unit::kFraction) {
    blocks = std::round(capacity.value * double(unique_blocks));
  }
  if (blocks < 1) {
    return absl::InvalidArgumentError(fmt::format("{}: capacity is less than one block", where));
  }
  // Block ids are 32-bit; a larger capacity cannot be filled and would overflow byte counts.
  constexpr double kMaxBlocks = 4294967295.0;
  if (!(blocks <= kMaxBlocks)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: capacity of {:.4g} blocks is more than the 2^32 - 1 a tier can hold", where, blocks));
  }
  return static_cast<uint64_t>(blocks);
}

absl::StatusOr<TierSpec> ParseTierSpec(size_t index, const std::string& text,
                                       const TierDefaults& defaults) {
  TierSpec spec;
  spec.config.name = fmt::format("T{}", index);
  spec.config.eviction.policy = defaults.policy;
  spec.config.admission.policy = defaults.admission;
  spec.config.admission.window_blocks = defaults.admission_window;  // 0 = capacity
  spec.config.leaf_first = defaults.leaf_first;
  bool has_capacity = false;
  KVTIER_ASSIGN_OR_RETURN(std::vector<std::string> items,
                          SplitList(fmt::format("--tier #{} '{}'", index + 1, text), text));
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    const std::string key = Trim(item.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : Trim(item.substr(eq + 1));
    const std::string where = fmt::format("--tier #{} ({})", index + 1, spec.config.name);
    KVTIER_RETURN_IF_ERROR(ApplyTierKey(where, key, value, &spec, &has_capacity));
  }
  if (!has_capacity) {
    return absl::InvalidArgumentError(fmt::format(
        "--tier #{} ({}): capacity is required, e.g. capacity=10GiB", index + 1, spec.config.name));
  }
  return spec;
}

absl::Status CheckPolicyName(const std::string& flag, const std::string& name) {
  if (name == "opt") return absl::OkStatus();
  EvictionConfig config;
  config.policy = name;
  if (config.Validate().ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{}: unknown policy '{}' (one of {}, opt)", flag, name, EvictionPolicyNames()));
}

absl::Status CheckAdmissionName(const std::string& flag, const std::string& name) {
  AdmissionConfig config;
  config.policy = name;
  if (config.Validate().ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}: unknown admission policy '{}' (one of {})",
                                                flag, name, AdmissionPolicyNames()));
}

absl::StatusOr<std::vector<std::string>> SplitList(const std::string& flag,
                                                   const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item =
        Trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) {
      return absl::InvalidArgumentError(fmt::format("{}: empty item in list '{}'", flag, text));
    }
    items.push_back(std::move(item));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

absl::StatusOr<uint64_t> ParseUint(const std::string& flag, const std::string& text) {
  const std::optional<double> v = ParseNumber(text);
  if (!v || std::floor(*v) != *v || *v > 1.8e19 || text.find_first_of(".eE") != std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("{}: expected a non-negative integer, got '{}'", flag, text));
  }
  return static_cast<uint64_t>(*v);
}

absl::StatusOr<double> ParsePositive(const std::string& flag, const std::string& text) {
  const std::optional<double> v = ParseNumber(text);
  if (!v || *v <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: expected a positive number, got '{}'", flag, text));
  }
  return *v;
}

}  // namespace kvtier::replay
