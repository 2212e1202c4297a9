// Reading `kvtier serve`'s /metrics (Prometheus text format) before and after a run, so the report
// can show what the server counted next to what the client saw. Only what the report uses is
// kept: series of the families whose names start with a prefix, histogram buckets left out.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace kvtier::serve_bench {

// Series as written ("name" or "name{label=\"value\",...}") -> value.
using MetricSeries = std::map<std::string, double>;

// The series of `text` whose names start with `prefix` ("_bucket" series skipped). Comments and
// lines that do not parse are skipped: a scrape is evidence, not input to trust.
MetricSeries ParseMetrics(std::string_view text, std::string_view prefix);

// after - before for every series of `after` (a series absent before counts from 0).
MetricSeries Delta(const MetricSeries& before, const MetricSeries& after);

// For the series of family `name` carrying label `label`: label value -> value. E.g.
// ByLabel(s, "kvtier_serve_prompt_tokens_total", "source") -> {"computed": 10, ...}.
std::map<std::string, double> ByLabel(const MetricSeries& series, std::string_view name,
                                      std::string_view label);

// The value of the unlabelled series `name`; `fallback` if absent.
double Value(const MetricSeries& series, const std::string& name, double fallback);

}  // namespace kvtier::serve_bench
