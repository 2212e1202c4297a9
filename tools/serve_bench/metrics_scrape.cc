#include "tools/serve_bench/metrics_scrape.h"

#include <cstdlib>
#include <string>

namespace kvtier::serve_bench {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The family name of a series: up to its '{'.
std::string_view Family(std::string_view series) { return series.substr(0, series.find('{')); }

}  // namespace

MetricSeries ParseMetrics(std::string_view text, std::string_view prefix) {
  MetricSeries out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty() || line.front() == '#' || line.substr(0, prefix.size()) != prefix) continue;
    // The series ends at the last space outside its labels (label values may hold spaces).
    const size_t close = line.find('}');
    const size_t space = line.find(' ', close == std::string_view::npos ? 0 : close);
    if (space == std::string_view::npos) continue;
    const std::string_view series = line.substr(0, space);
    if (EndsWith(Family(series), "_bucket")) continue;
    const std::string value(line.substr(space + 1));
    char* parsed_end = nullptr;
    const double v = std::strtod(value.c_str(), &parsed_end);
    if (parsed_end == value.c_str()) continue;
    out[std::string(series)] = v;
  }
  return out;
}

MetricSeries Delta(const MetricSeries& before, const MetricSeries& after) {
  MetricSeries out;
  for (const auto& [series, value] : after) {
    const auto it = before.find(series);
    out[series] = value - (it == before.end() ? 0.0 : it->second);
  }
  return out;
}

std::map<std::string, double> ByLabel(const MetricSeries& series, std::string_view name,
                                      std::string_view label) {
  std::map<std::string, double> out;
  const std::string key = std::string(label) + "=\"";
  for (const auto& [s, value] : series) {
    if (Family(s) != name) continue;
    size_t at = s.find(key);
    // The label must start the label list or follow a comma, not end another label's name.
    while (at != std::string::npos && s[at - 1] != '{' && s[at - 1] != ',')
      at = s.find(key, at + 1);
    if (at == std::string::npos) continue;
    const size_t begin = at + key.size();
    const size_t end = s.find('"', begin);
    if (end == std::string::npos) continue;
    out[s.substr(begin, end - begin)] += value;
  }
  return out;
}

double Value(const MetricSeries& series, const std::string& name, double fallback) {
  const auto it = series.find(name);
  return it == series.end() ? fallback : it->second;
}

}  // namespace kvtier::serve_bench
