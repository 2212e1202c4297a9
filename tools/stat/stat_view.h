// The screen `kvtier stat` prints: tiers (capacity, occupancy, admitting, evictions; a row per
// pool and tier for a daemon of several memory pools), request
// totals with their rates between two scrapes, block hit ratios (overall and by tier, total and
// over the interval), and the bytes moved each way. Pure formatting of samples, so tests can pin
// it without a daemon.
#pragma once

#include <optional>
#include <string>

#include "client/protocol/wire_format.h"
#include "tools/stat/metrics_source.h"

namespace kvtier::stat {

struct StatInput {
  std::string source;                   // what was read, for the title (the URL)
  std::optional<MetricsSample> before;  // the earlier scrape; none: no rates
  MetricsSample now;
  double interval_s = 0;                     // between the two scrapes
  std::optional<protocol::StatsWire> stats;  // --socket: the protocol's Stats op
  std::string socket_path;
};

std::string FormatStatScreen(const StatInput& input);

// "1.5 GiB", "512 B": binary units with one decimal.
std::string HumanBytes(double bytes);

}  // namespace kvtier::stat
