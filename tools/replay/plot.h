// Line plots written as PNG (cairo), for miss-ratio curves from `kvtier replay --sweep`.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::replay {

struct PlotSeries {
  std::string label;      // legend entry, e.g. "lru" or "s3fifo+second"
  std::vector<double> x;  // same length as y
  std::vector<double> y;
};

struct PlotSpec {
  std::string title;
  std::string x_label;  // e.g. "capacity (blocks)"
  std::string y_label;  // e.g. "miss ratio"
  bool log_x = false;
  std::vector<PlotSeries> series;
  int width = 1000, height = 650;
};

// Draws axes with ticks and labels, one coloured line with markers per series, and a legend, into
// the PNG file at `path`. InvalidArgument for an empty or inconsistent spec; Internal naming the
// path if the file cannot be written.
absl::Status WritePlotPng(const PlotSpec& spec, const std::string& path);

}  // namespace kvtier::replay
