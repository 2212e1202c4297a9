#include "tools/replay/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

namespace kvtier::replay {

double CostModel::ReadBytesPerS(size_t tier) const {
  double gbps;
  if (tier < read_gbps.size()) {
    gbps = read_gbps[tier];
  } else {
    constexpr size_t kDefaults = std::size(kDefaultReadGbps);
    gbps = kDefaultReadGbps[std::min(tier, kDefaults - 1)];
  }
  return gbps * 1e9;
}

absl::Status CostModel::Validate() const {
  if (!(prefill_tokens_per_s > 0)) {
    return absl::InvalidArgumentError(
        fmt::format("--prefill-tokens-per-s must be > 0, got {}", prefill_tokens_per_s));
  }
  for (size_t t = 0; t < read_gbps.size(); ++t) {
    if (!(read_gbps[t] > 0)) {
      return absl::InvalidArgumentError(
          fmt::format("--read-gbps: tier {} must be > 0, got {}", t, read_gbps[t]));
    }
  }
  for (size_t t = 0; t < read_latency_s.size(); ++t) {
    if (!(read_latency_s[t] >= 0)) {
      return absl::InvalidArgumentError(fmt::format("--tier #{}: latency_us must be >= 0, got {}",
                                                    t + 1, read_latency_s[t] * 1e6));
    }
  }
  return absl::OkStatus();
}

double CostModel::RequestSaving(uint64_t tokens_saved,
                                absl::Span<const uint64_t> bytes_loaded) const {
  double saving = static_cast<double>(tokens_saved) / prefill_tokens_per_s;
  for (size_t t = 0; t < bytes_loaded.size(); ++t) {
    if (bytes_loaded[t] == 0) continue;
    saving -= static_cast<double>(bytes_loaded[t]) / ReadBytesPerS(t);
    if (t < read_latency_s.size()) saving -= read_latency_s[t];
  }
  return std::max(saving, 0.0);
}

absl::StatusOr<std::vector<double>> ParseGbpsList(const std::string& flag,
                                                  const std::string& text) {
  std::vector<double> values;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !(v > 0)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: expected comma-separated positive GB/s per tier, got '{}' in '{}'", flag,
                      item, text));
    }
    values.push_back(v);
    start = comma + 1;
  }
  return values;
}

}  // namespace kvtier::replay
