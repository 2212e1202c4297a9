#include "tools/bench/bench_report.h"

#include <fmt/format.h>

namespace kvtier::bench {
namespace {

double Us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

std::string Percentiles(const LatencyHistogram& h) {
  return fmt::format("{:>8.1f} {:>8.1f} {:>8.1f} {:>8.1f} {:>9.1f}", Us(h.Quantile(0.5)),
                     Us(h.Quantile(0.9)), Us(h.Quantile(0.99)), Us(h.Quantile(0.999)), Us(h.max()));
}

std::string Header(const BenchOptions& o, const BenchTotals& t) {
  const std::string keys =
      o.trace.empty()
          ? fmt::format(
                "{} keys/op, {}{} over {} sequences (seed {})", o.keys, KeyDistName(o.space.dist),
                o.space.dist == KeyDist::kZipf ? fmt::format(" skew {}", o.space.zipf_skew) : "",
                o.space.sequences, o.space.seed)
          : fmt::format("trace {} at {}", o.trace,
                        o.speed > 0 ? fmt::format("{}x real time", o.speed) : "full speed");
  return fmt::format(
      "kvtier bench: op {}, {}, {} process(es) x {} thread(s), payload {} B, window {:.3f} s\n",
      BenchOpName(o.op), keys, o.processes, o.threads, t.payload_bytes, t.window_s);
}

std::string Row(const char* name, const OpStats& s, double window_s) {
  const double w = window_s > 0 ? window_s : 1;
  const double hit = s.keys ? 100.0 * static_cast<double>(s.hit_keys) / s.keys : 0;
  return fmt::format("{:<7} {:>10} {:>12.0f} {:>12.0f} {:>6.1f} {:>8.3f} {} {:>7} {:>7}\n", name,
                     s.ops, s.ops / w, s.keys / w, hit, s.bytes / w / 1e9, Percentiles(s.latency),
                     s.retries, s.errors);
}

std::string SocketLine(const BenchTotals& t, const Ceilings& c) {
  const LatencyHistogram& h = *c.socket;
  const LatencyHistogram& ring = t.op[static_cast<int>(BenchOp::kLookup)].latency.count()
                                     ? t.op[static_cast<int>(BenchOp::kLookup)].latency
                                     : t.op[static_cast<int>(BenchOp::kNop)].latency;
  const double p50 = static_cast<double>(h.Quantile(0.5));
  return fmt::format(
      "ceiling unix-socket round trip ({} B out, {} B back, {} round trips): p50 {:.1f} us, p90 "
      "{:.1f} us, p99 {:.1f} us, p999 {:.1f} us; ring p50 / socket p50 = {:.2f}\n",
      c.socket_request_bytes, c.socket_response_bytes, h.count(), Us(h.Quantile(0.5)),
      Us(h.Quantile(0.9)), Us(h.Quantile(0.99)), Us(h.Quantile(0.999)),
      p50 > 0 ? static_cast<double>(ring.Quantile(0.5)) / p50 : 0.0);
}

// One line per direction measured, with the matching op's bandwidth as a share of it. `memory`
// says which memory the ceiling copied into or out of.
std::string MemcpyLine(const BenchOptions& o, const BenchTotals& t, BenchOp op, double ceiling,
                       const std::string& memory = "cold memory") {
  const char* what = op == BenchOp::kPut ? "into" : "out of";
  std::string line = fmt::format("ceiling memcpy {} {} ({} thread(s), {} B blocks): {:.3f} GB/s",
                                 what, memory, o.workers(), t.payload_bytes, ceiling / 1e9);
  const OpStats& s = t.op[static_cast<int>(op)];
  if (s.bytes > 0 && t.window_s > 0) {
    const double rate = s.bytes / t.window_s;
    line += fmt::format("; {} {:.3f} GB/s = {:.0f}% of it", BenchOpName(op), rate / 1e9,
                        100 * rate / ceiling);
  }
  return line + "\n";
}

}  // namespace

std::string FormatBenchReport(const BenchOptions& o, const BenchTotals& t, const Ceilings& c) {
  std::string out = Header(o, t);
  out += fmt::format(
      "{:<7} {:>10} {:>12} {:>12} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>7} {:>7}\n", "op",
      "ops", "ops/s", "keys/s", "hit%", "GB/s", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
      "retries", "errors");
  for (BenchOp op : {BenchOp::kLookup, BenchOp::kGet, BenchOp::kPut, BenchOp::kNop}) {
    const OpStats& s = t.op[static_cast<int>(op)];
    if (s.ops > 0) out += Row(BenchOpName(op), s, t.window_s);
  }
  out +=
      "hit%: lookup keys in the hit prefix; get blocks found; put blocks stored. "
      "Latencies per client call.\n";
  if (o.depth > 1) {
    out += fmt::format("--depth {}: each lookup call carries {} lookups (ops counts lookups)\n",
                       o.depth, o.depth);
  }
  if (c.socket) out += SocketLine(t, c);
  if (c.memcpy_into_cold) out += MemcpyLine(o, t, BenchOp::kPut, *c.memcpy_into_cold);
  if (c.memcpy_out_of_cold) out += MemcpyLine(o, t, BenchOp::kGet, *c.memcpy_out_of_cold);
  const std::string shaped =
      fmt::format("a T1-shaped segment ({} MiB shared, shuffled slots)", c.t1_bytes >> 20);
  if (c.memcpy_into_t1_shaped) {
    out += MemcpyLine(o, t, BenchOp::kPut, *c.memcpy_into_t1_shaped, shaped);
  }
  if (c.memcpy_out_of_t1_shaped) {
    out += MemcpyLine(o, t, BenchOp::kGet, *c.memcpy_out_of_t1_shaped, shaped);
  }
  return out;
}

}  // namespace kvtier::bench
