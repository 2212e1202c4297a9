// What `kvtier bench` prints: one line describing the run, one row per op that ran (throughput,
// keys, hit share, bandwidth, latency percentiles), then each ceiling measured in the same run and
// the figure's ratio to it. Pure formatting, so tests can pin the fields.
#pragma once

#include <optional>
#include <string>

#include "tools/bench/bench_options.h"
#include "tools/bench/bench_run.h"

namespace kvtier::bench {

struct Ceilings {
  std::optional<LatencyHistogram> socket;  // --compare-socket
  uint32_t socket_request_bytes = 0, socket_response_bytes = 0;
  // --compare-memcpy, bytes/s: into cold memory (put's ceiling), out of it (get's).
  std::optional<double> memcpy_into_cold, memcpy_out_of_cold;
  // The same, into / out of a T1-sized shared segment in shuffled slot order (MemcpyT1Shaped...).
  std::optional<double> memcpy_into_t1_shaped, memcpy_out_of_t1_shaped;
  uint64_t t1_bytes = 0;
};

std::string FormatBenchReport(const BenchOptions& options, const BenchTotals& totals,
                              const Ceilings& ceilings);

}  // namespace kvtier::bench
