// Runs the workers of `kvtier bench`: forks `processes` children, each runs `threads` workers
// (bench_worker.h) and exits; their results come back through a shared anonymous mapping, and
// the parent merges them once every child has exited.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "tools/bench/bench_options.h"
#include "tools/bench/bench_worker.h"

namespace kvtier::bench {

struct BenchTotals {
  OpStats op[kRecordedOps];  // merged over every worker, indexed by BenchOp
  double window_s = 0;       // from the common start to the last worker's last op
  uint32_t payload_bytes = 0;
};

// Call before starting any thread (it forks). `trace` may be null. Errors: Unavailable when a
// worker could not connect (the message names the socket), Internal when a child died.
absl::StatusOr<BenchTotals> RunBench(const BenchOptions& options, const replay::Trace* trace);

}  // namespace kvtier::bench
