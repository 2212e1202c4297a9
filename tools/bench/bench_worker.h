// One `kvtier bench` worker thread: its own Client connection, its own key stream, its own
// results. Workers of every process meet at a StartGate kept in shared memory, so the timed phase
// starts everywhere at once and setup (connecting, --fill) is never timed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "tools/bench/bench_options.h"
#include "tools/bench/latency_histogram.h"
#include "tools/replay/trace.h"

namespace kvtier::bench {

// What one worker did for one kind of op. Plain data: it lives in memory shared with the parent.
struct OpStats {
  uint64_t ops = 0;
  uint64_t keys = 0;      // keys sent
  uint64_t hit_keys = 0;  // lookup: hit prefix; get: blocks copied; put: blocks stored
  uint64_t bytes = 0;     // payload bytes copied (get, put)
  uint64_t retries = 0;   // put: blocks refused for now (kRetryLater)
  uint64_t errors = 0;    // calls that returned an error status
  LatencyHistogram latency;

  void Merge(const OpStats& other);
};

struct WorkerResult {
  OpStats op[kRecordedOps];  // indexed by BenchOp (lookup, get, put, nop)
  int64_t end_ns = 0;        // steady clock when its last op finished
  uint32_t payload_bytes = 0;
  char error[256] = {};  // set when the worker could not run (e.g. connect failed)
};

// Lives in a MAP_SHARED mapping; all members are lock-free atomics, so usable across fork.
struct StartGate {
  std::atomic<uint32_t> ready{0};  // workers set up (or failed)
  std::atomic<int64_t> go_ns{0};   // 0 until the parent starts the timed phase
  std::atomic<uint32_t> abort{0};  // the parent gave up (a worker process died)
};

struct WorkerContext {
  const BenchOptions* options = nullptr;
  const replay::Trace* trace = nullptr;  // set with --trace
  std::shared_ptr<const synth::ZipfSampler> zipf;
  uint32_t worker = 0;  // 0..workers()-1
};

// Connects, fills if asked, announces itself on the gate, waits for go, runs the ops and writes
// *result. Never throws; failures go to result->error.
void RunWorker(const WorkerContext& context, StartGate* gate, WorkerResult* result);

}  // namespace kvtier::bench
