#include "tools/bench/bench_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "client/protocol/wire_format.h"

namespace kvtier::bench {

const char* BenchOpName(BenchOp op) {
  switch (op) {
    case BenchOp::kLookup:
      return "lookup";
    case BenchOp::kGet:
      return "get";
    case BenchOp::kPut:
      return "put";
    case BenchOp::kNop:
      return "nop";
    case BenchOp::kMixed:
      return "mixed";
  }
  return "?";
}

void AddBenchFlags(CLI::App* cmd, BenchFlags* f) {
  BenchOptions& o = f->options;
  cmd->add_option("--socket", o.socket_path, "kvtierd's socket")->capture_default_str();
  cmd->add_option("--op", f->op,
                  "lookup, get, put, nop or mixed (lookup + get hits + put misses); default "
                  "lookup, or mixed with --trace");
  cmd->add_option("--keys", o.keys, "Keys (blocks) per op, 1 to 1024")->capture_default_str();
  cmd->add_option("--depth", o.depth,
                  "Lookups per client call, sent back to back (Client::LookupMany); --op lookup")
      ->capture_default_str();
  cmd->add_option("--dist", f->dist, "Key distribution: uniform, zipf or sequential")
      ->capture_default_str();
  cmd->add_option("--sequences", o.space.sequences, "Key chains in the key space")
      ->capture_default_str();
  cmd->add_option("--skew", o.space.zipf_skew, "Zipf exponent (--dist zipf)")
      ->capture_default_str();
  cmd->add_option("--seed", o.space.seed, "Seed of keys and draws; a new seed gives fresh keys")
      ->capture_default_str();
  cmd->add_option("-p,--processes", o.processes, "Client processes (fork)")->capture_default_str();
  cmd->add_option("-t,--threads", o.threads, "Threads per process, each with its own client")
      ->capture_default_str();
  cmd->add_option("-d,--duration", o.duration_s, "Seconds to run")->capture_default_str();
  cmd->add_option("--ops", o.ops, "Ops per thread instead of a duration")->capture_default_str();
  cmd->add_option("--payload-bytes", o.payload_bytes, "Bytes per block; 0 = the T1 slot size")
      ->capture_default_str();
  cmd->add_option("--spin-us", o.spin_us, "Microseconds a client polls for a completion first")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_flag("--prefault", o.prefault,
                "Map all of T1 into each client before timing (else first touches fault pages in)");
  cmd->add_flag("--fill", o.fill, "Put every sequence first, untimed (use with --op get)");
  cmd->add_option("--trace", o.trace, "Replay this trace (Mooncake JSONL) as mixed ops");
  cmd->add_option("--speed", o.speed, "Trace time scale: 1 real time, 0 as fast as possible")
      ->capture_default_str();
  cmd->add_option("--model", o.model_id, "Model id of the namespace the clients use")
      ->capture_default_str();
  cmd->add_flag("--compare-socket", o.compare_socket,
                "Also time a Unix-socket round trip carrying the same bytes (the ceiling)");
  cmd->add_flag("--compare-memcpy", o.compare_memcpy,
                "Also time memcpy of the same blocks with as many threads (the ceiling)");
}

namespace {

absl::Status CheckOptions(const BenchOptions& o) {
  auto bad = [](std::string text) { return absl::InvalidArgumentError(std::move(text)); };
  if (o.keys < 1 || o.keys > protocol::kMaxBatchKeys) {
    return bad(fmt::format("--keys {}: must be 1 to {}", o.keys, protocol::kMaxBatchKeys));
  }
  if (o.depth < 1 || o.depth > 4096)
    return bad(fmt::format("--depth {}: must be 1 to 4096", o.depth));
  if (o.depth > 1 && o.op != BenchOp::kLookup) return bad("--depth: only with --op lookup");
  if (o.processes < 1 || o.processes > 256) return bad("--processes: must be 1 to 256");
  if (o.threads < 1 || o.threads > 256) return bad("--threads: must be 1 to 256");
  if (o.workers() > 1024) return bad("--processes x --threads: at most 1024 workers");
  if (o.ops == 0 && !(o.duration_s > 0)) return bad("--duration: must be positive");
  if (o.space.sequences < 1) return bad("--sequences: must be at least 1");
  if (o.space.dist == KeyDist::kZipf && o.space.sequences > 100000000) {
    return bad("--sequences: at most 1e8 with --dist zipf (its table takes 8 bytes each)");
  }
  if (!(o.space.zipf_skew >= 0)) return bad("--skew: must be >= 0");
  if (o.speed < 0) return bad("--speed: must be >= 0");
  if (!o.trace.empty() && o.op != BenchOp::kMixed) {
    return bad("--trace replays requests as mixed ops; use --op mixed (or leave --op out)");
  }
  if (o.fill && o.op == BenchOp::kPut) return bad("--fill: put stores the keys itself");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchOptions> ResolveBenchFlags(const BenchFlags& f) {
  BenchOptions o = f.options;
  KVTIER_ASSIGN_OR_RETURN(o.space.dist, ParseKeyDist(f.dist));
  // No --op: lookup, or mixed for a trace (the only op a trace replays). An explicit --op other
  // than mixed with --trace is refused below, never silently replaced.
  const std::string op_name = !f.op.empty() ? f.op : o.trace.empty() ? "lookup" : "mixed";
  bool found = false;
  for (BenchOp op :
       {BenchOp::kLookup, BenchOp::kGet, BenchOp::kPut, BenchOp::kNop, BenchOp::kMixed}) {
    if (op_name == BenchOpName(op)) {
      o.op = op;
      found = true;
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(
        fmt::format("--op {}: expected lookup, get, put, nop or mixed", f.op));
  }
  KVTIER_RETURN_IF_ERROR(CheckOptions(o));
  return o;
}

}  // namespace kvtier::bench
