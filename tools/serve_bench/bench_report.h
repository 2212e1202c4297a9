// What `kvtier serve-bench` prints: the run, request counts and every error by kind, latency
// percentiles (TTFT, inter-token, time per output token, end to end), throughput, prompt tokens
// cached vs computed as the usage fields and the server's /metrics counted them (per source when
// the server reports sources), next to the cached tokens an infinite prefix cache would have given
// the same requests in the same order (the ceiling). A table, or one JSON object.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/serve_bench/arrival_driver.h"
#include "tools/serve_bench/metrics_scrape.h"

namespace kvtier::serve_bench {

struct Percentiles {
  size_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

// Nearest-rank percentiles of `samples` (all zero when empty).
Percentiles Summarize(std::vector<double> samples);

// What the run was, as the command's flags and the server said.
struct RunInfo {
  std::string trace;
  std::string server;  // host:port
  std::string model;
  int64_t max_model_len = 0;
  uint32_t trace_block_tokens = 0, block_tokens = 0;
  double time_scale = 1;
  int max_in_flight = 0;
  double schedule_span_s = 0;  // the last arrival, after scaling
};

// Per request, what the client knew before sending.
struct SentRequest {
  uint64_t line = 0;  // in the trace
  double at_s = 0;    // when it was due, after the start
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;
  bool truncated = false;
  int64_t ideal_cached_tokens = 0;
};

struct BenchReport {
  RunInfo info;
  size_t requests = 0, ok = 0, truncated = 0;
  std::map<std::string, size_t> errors;   // kind -> count
  std::vector<std::string> first_errors;  // a few, naming the trace line
  double wall_s = 0;
  Percentiles ttft_s, itl_s, tpot_s, latency_s, send_lag_s;
  // Over the requests that succeeded (usage), and the ceiling over the same requests.
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0, ideal_cached_tokens = 0;
  // The server's /metrics over the run: absent when it could not be read (metrics_error says why).
  std::optional<MetricSeries> metrics_delta;
  std::string metrics_error;
};

BenchReport BuildReport(const RunInfo& info, const std::vector<SentRequest>& sent,
                        const DriverResult& result);

std::string FormatTable(const BenchReport& report);
nlohmann::ordered_json ToJson(const BenchReport& report);

// One JSON object per request (JSONL), in trace order: what was sent (trace line, due time, send
// lag, prompt tokens, max_tokens, cut or not, the cold infinite-cache share) and what came back
// (HTTP status, error kind and message, TTFT, latency, usage), for analyses the summary does not
// make (TTFT against cached share, say).
std::string RequestLines(const std::vector<SentRequest>& sent, const DriverResult& result);

}  // namespace kvtier::serve_bench
