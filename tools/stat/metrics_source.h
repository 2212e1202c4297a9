// Reading kvtierd's Prometheus endpoint for `kvtier stat`: a plain HTTP/1.0 GET (no keep-alive,
// no compression asked for) and a reader of the text exposition format.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/status.h"

namespace kvtier::stat {

struct MetricsUrl {
  std::string host = "127.0.0.1";
  std::string port = "9464";
  std::string path = "/metrics";
  std::string ToString() const;  // http://host:port/path
};

// "host:port", "http://host:port" or "http://host:port/path" (path defaults to /metrics).
// InvalidArgument naming the text otherwise.
absl::StatusOr<MetricsUrl> ParseMetricsUrl(const std::string& text);

// The body of a 200 answer. Unavailable naming the URL and the reason when nothing answers (or
// not within 5 s); FailedPrecondition with the status line for any other answer.
absl::StatusOr<std::string> FetchMetrics(const MetricsUrl& url);

// The samples of one scrape, keyed as served: `name` or `name{label="value",...}`.
class MetricsSample {
 public:
  MetricsSample() = default;
  explicit MetricsSample(const std::string& text);

  std::optional<double> Get(const std::string& series) const;
  // Sum of every series of family `name` (all label values); 0 when none.
  double Sum(const std::string& name) const;
  // Sum of the series of `name` whose label `label` is `value`.
  double SumWhere(const std::string& name, const std::string& label,
                  const std::string& value) const;
  // Sum of the series of `name` whose labels have every value of `labels` (label -> value).
  double SumWhere(const std::string& name, const std::map<std::string, std::string>& labels) const;
  // The values label `label` takes in family `name`, sorted.
  std::set<std::string> LabelValues(const std::string& name, const std::string& label) const;
  size_t size() const { return samples_.size(); }

 private:
  std::map<std::string, double> samples_;
};

}  // namespace kvtier::stat
