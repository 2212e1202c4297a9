// `kvtier bench`'s command line: the flags as typed (BenchFlags) and the validated run they
// describe (BenchOptions). Separate so that tests can parse argument vectors without a daemon.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "tools/bench/key_space.h"

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::bench {

// What each op of a worker does (one "op" is one client call unless said otherwise):
//   lookup  Lookup of `keys` keys;
//   get     GetInto of `keys` keys (lease, copy out of T1, release: two round trips);
//   put     Put of `keys` blocks (put_begin, copies into T1, put_commit);
//   mixed   what an engine does per request: lookup, get the hit prefix, put the missing rest
//           (each recorded under its own op);
//   nop     an empty round trip.
enum class BenchOp { kLookup = 0, kGet, kPut, kNop, kMixed };
inline constexpr int kRecordedOps = 4;  // lookup, get, put, nop: what results are kept per
const char* BenchOpName(BenchOp op);

struct BenchOptions {
  std::string socket_path = "kvtier-data/kvtierd.sock";  // the default config's socket
  std::string model_id = "kvtier-bench";                 // the namespace the clients declare
  BenchOp op = BenchOp::kLookup;
  uint32_t keys = 1;   // keys per op, 1..1024 (the protocol's max_batch)
  uint32_t depth = 1;  // lookups per client call (Client::LookupMany), 1..4096; --op lookup only
  KeySpace space;
  uint32_t processes = 1;      // forked, each with its own connections
  uint32_t threads = 1;        // per process, each with its own Client
  double duration_s = 5;       // how long the timed phase runs (ignored when ops > 0)
  uint64_t ops = 0;            // ops per thread; 0 = run for duration_s
  uint32_t payload_bytes = 0;  // per block for get/put; 0 = the daemon's slot size
  bool prefault = false;  // map every T1 page into each client before timing (see bench_worker)
  bool fill = false;      // put every sequence's keys before timing (for get)
  int spin_us = 20;       // the clients' poll before sleeping (ClientOptions::spin_us)
  std::string trace;      // replay this trace instead of generated keys
  double speed = 0;       // trace time scale: 1 = real time, 0 = as fast as possible
  bool compare_socket = false;  // measure a Unix-socket round trip of the same bytes too
  bool compare_memcpy = false;  // measure memcpy bandwidth with as many threads too

  uint32_t workers() const { return processes * threads; }
};

// The flags as CLI11 fills them; strings are checked by Resolve.
struct BenchFlags {
  BenchOptions options;
  std::string op;  // empty: not given (lookup, or mixed with --trace)
  std::string dist = "uniform";
};

void AddBenchFlags(CLI::App* cmd, BenchFlags* flags);
// InvalidArgument naming the flag when a combination is wrong.
absl::StatusOr<BenchOptions> ResolveBenchFlags(const BenchFlags& flags);

}  // namespace kvtier::bench
