// Test helpers for the metrics endpoint: a scrape of 127.0.0.1:<port> and the samples it served,
// through the same HTTP GET and text-format reader `kvtier stat` uses
// (tools/stat/metrics_source.h).
#pragma once

#include <optional>
#include <string>

#include "tools/stat/metrics_source.h"

namespace kvtier::testing {

// GET http://127.0.0.1:<port><path>: the body of a 200 answer, or why not.
inline absl::StatusOr<std::string> HttpGet(int port, const std::string& path = "/metrics") {
  return stat::FetchMetrics(stat::MetricsUrl{"127.0.0.1", std::to_string(port), path});
}

// The samples of a text-format page, keyed by everything before the value.
class MetricsPage : public stat::MetricsSample {
 public:
  explicit MetricsPage(const std::string& text) : stat::MetricsSample(text) {}
  // Like Get, with -1 (never a valid counter or level here) when the series is absent.
  double Value(const std::string& series) const { return Get(series).value_or(-1); }
};

}  // namespace kvtier::testing
