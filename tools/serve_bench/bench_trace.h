// The requests `kvtier serve-bench` replays: a Mooncake- or Bailian-format trace (DESIGN.md "Trace
// replay") read whole, keeping per request what replay's compact Trace drops (the output length,
// the hash ids as written). Lines are parsed by replay's TraceLineParser, so the two tools accept
// the same syntax; a malformed line is an InvalidArgument "<file>:<line>: <what was wrong>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::serve_bench {

struct TraceRequest {
  uint64_t line = 0;          // 1-based line in the file, for messages
  double timestamp_ms = 0;    // arrival, milliseconds from the trace's start
  uint32_t input_length = 0;  // prompt tokens, at the trace's block size
  uint32_t output_length = 0;
  std::vector<uint64_t> hash_ids;  // prefix-chained block ids, one per (partial) block
};

struct BenchTrace {
  std::vector<TraceRequest> requests;  // in file order
  uint32_t block_tokens = 0;           // tokens per hash id: 512 Mooncake, 16 Bailian
};

struct BenchTraceOptions {
  // Stop after this many requests (0: all). Lines after the last one kept are not read.
  uint64_t max_requests = 0;
};

// Reads `path` ("-": stdin; plain, gzip or zstd). Every field Mooncake defines is required
// (output_length too: it is each request's max_tokens); the hash id count must be
// ceil(input_length / block_tokens) or floor, as `kvtier replay` checks. NotFound /
// PermissionDenied name the file.
absl::StatusOr<BenchTrace> ReadBenchTrace(const std::string& path,
                                          const BenchTraceOptions& options);

}  // namespace kvtier::serve_bench
