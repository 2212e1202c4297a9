#include "tools/bench/bench_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>

#include "client/kvtier_client.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/bench_run.h"
#include "tools/bench/ceilings.h"
#include "tools/replay/trace_reader.h"

namespace kvtier::bench {
namespace {

int Fail(const absl::Status& status, int code) {
  std::fprintf(stderr, "kvtier bench: %s\n", std::string(status.message()).c_str());
  return code;
}

// The daemon's T1 size, for the T1-shaped memcpy ceiling (one short connection).
absl::StatusOr<uint64_t> DaemonT1Bytes(const BenchOptions& o) {
  client::ClientOptions options;
  options.socket_path = o.socket_path;
  options.ns.model_id = o.model_id;
  options.client_name = "kvtier-bench-ceiling";
  options.populate_t1 = false;
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, client::Client::Connect(options));
  return c->t1_bytes();
}

// The ceilings asked for, measured after the daemon run (forks and threads of its own).
absl::StatusOr<Ceilings> MeasureCeilings(const BenchOptions& o, const BenchTotals& t) {
  Ceilings c;
  if (o.compare_socket) {
    const uint32_t keys = o.op == BenchOp::kNop ? 0 : o.keys;
    c.socket_request_bytes = LookupRequestBytes(keys);
    c.socket_response_bytes = LookupResponseBytes(keys);
    const uint64_t ops = o.ops > 0 ? o.ops : 0;
    KVTIER_ASSIGN_OR_RETURN(c.socket,
                            SocketRoundTrips(c.socket_request_bytes, c.socket_response_bytes, ops,
                                             std::min(o.duration_s, 2.0)));
  }
  const double seconds = std::min(o.duration_s, 2.0);
  if (o.compare_memcpy) {
    KVTIER_ASSIGN_OR_RETURN(c.t1_bytes, DaemonT1Bytes(o));
  }
  if (o.compare_memcpy && o.op != BenchOp::kGet) {
    c.memcpy_into_cold =
        MemcpyBandwidth(o.workers(), t.payload_bytes, seconds, CopyDirection::kIntoCold);
    KVTIER_ASSIGN_OR_RETURN(c.memcpy_into_t1_shaped,
                            MemcpyT1ShapedBandwidth(o.workers(), t.payload_bytes, c.t1_bytes,
                                                    seconds, CopyDirection::kIntoCold));
  }
  if (o.compare_memcpy && o.op != BenchOp::kPut) {
    c.memcpy_out_of_cold =
        MemcpyBandwidth(o.workers(), t.payload_bytes, seconds, CopyDirection::kOutOfCold);
    KVTIER_ASSIGN_OR_RETURN(c.memcpy_out_of_t1_shaped,
                            MemcpyT1ShapedBandwidth(o.workers(), t.payload_bytes, c.t1_bytes,
                                                    seconds, CopyDirection::kOutOfCold));
  }
  return c;
}

int Run(const BenchFlags& flags) {
  absl::StatusOr<BenchOptions> options = ResolveBenchFlags(flags);
  if (!options.ok()) return Fail(options.status(), 2);
  const BenchOptions& o = *options;
  std::optional<replay::Trace> trace;
  if (!o.trace.empty()) {
    absl::StatusOr<replay::Trace> loaded = replay::LoadTrace(o.trace, {});
    if (!loaded.ok()) return Fail(loaded.status(), 1);
    trace = std::move(*loaded);
  }
  absl::StatusOr<BenchTotals> totals = RunBench(o, trace ? &*trace : nullptr);
  if (!totals.ok()) return Fail(totals.status(), 1);
  absl::StatusOr<Ceilings> ceilings = MeasureCeilings(o, *totals);
  if (!ceilings.ok()) return Fail(ceilings.status(), 1);
  std::fputs(FormatBenchReport(o, *totals, *ceilings).c_str(), stdout);
  return 0;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Load a running kvtierd: processes x threads of clients doing lookup/get/put with uniform, "
      "zipf or sequential keys, or replaying a trace; prints throughput and latency percentiles");
  auto flags = std::make_shared<BenchFlags>();
  AddBenchFlags(cmd, flags.get());
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace kvtier::bench
