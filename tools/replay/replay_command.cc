// `kvtier replay`: flags -> ReplayPlan (replay_plan.h) -> load the trace once -> one run, a policy
// comparison, or a capacity sweep -> a table or one JSON object on stdout.
#include "tools/replay/replay_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "tools/common/progress.h"
#include "tools/replay/replay_plan.h"
#include "tools/replay/report.h"
#include "tools/replay/sweep.h"
#include "tools/replay/trace_reader.h"

namespace kvtier::replay {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

struct Failure {
  int exit_code;
  absl::Status status;
};

absl::StatusOr<Trace> Load(const ReplayPlan& plan) {
  ProgressBar bar("load");
  TraceLoadOptions options = plan.load;
  options.on_progress = [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); };
  return LoadTrace(plan.trace_path, options);
}

ReplayReport NewReport(const ReplayPlan& plan, const Trace& trace, uint64_t block_bytes) {
  ReplayReport report;
  report.trace_path = plan.trace_path;
  report.block_tokens = trace.block_tokens;
  report.block_bytes = block_bytes;
  report.skipped_lines = trace.skipped_lines;
  report.cost = plan.cost;
  return report;
}

// Runs the stack once per --compare policy (or once), then prints.
absl::Status RunReplay(const ReplayPlan& plan, const Trace& trace, const ResolvedTiers& resolved) {
  std::vector<ReplayReport> reports;
  const std::vector<std::string> policies =
      plan.compare.empty() ? std::vector<std::string>{""} : plan.compare;
  for (const std::string& policy : policies) {
    std::vector<TierConfig> tiers = resolved.tiers;
    if (!policy.empty()) {
      for (TierConfig& tier : tiers) tier.eviction.policy = policy;
    }
    ReplayReport report = NewReport(plan, trace, resolved.block_bytes);
    report.cost.read_gbps = resolved.read_gbps;
    report.cost.read_latency_s = resolved.read_latency_s;
    SimOptions options;
    options.cost = report.cost;
    options.block_bytes = resolved.block_bytes;
    options.shape = plan.shape;
    ProgressBar bar(policy.empty() ? "replay" : "replay " + policy);
    options.on_progress = [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); };
    KVTIER_ASSIGN_OR_RETURN(report.result, Simulate(trace, tiers, options));
    reports.push_back(std::move(report));
  }
  std::string out;
  if (plan.json) {
    out = (plan.compare.empty() ? ReportJson(reports.front()) : CompareJson(reports)).dump(2);
    out += "\n";
  } else {
    out = plan.compare.empty() ? FormatReportTable(reports.front()) : FormatCompareTable(reports);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return absl::OkStatus();
}

absl::Status RunSweepMode(const ReplayPlan& plan, const Trace& trace,
                          const ResolvedTiers& resolved) {
  ProgressBar bar("sweep");
  SweepConfig config = plan.sweep;
  config.capacities = resolved.sweep_capacities;
  KVTIER_ASSIGN_OR_RETURN(
      std::vector<SweepPoint> points,
      RunSweep(trace, config, [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); }));
  const std::string csv = plan.sweep_out + ".csv", png = plan.sweep_out + ".png";
  KVTIER_RETURN_IF_ERROR(WriteSweepCsv(points, csv));
  KVTIER_RETURN_IF_ERROR(
      WriteSweepPlot(points,
                     fmt::format("{}: prefix miss ratio by capacity",
                                 std::filesystem::path(plan.trace_path).filename().string()),
                     png));
  std::string out;
  if (plan.json) {
    out = SweepJson(points, trace, csv, png).dump(2) + "\n";
  } else {
    out = FormatSweepTable(points) + fmt::format("\nwrote {} and {}\n", csv, png);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return absl::OkStatus();
}

// The whole subcommand; a Failure carries the exit code its error deserves.
std::optional<Failure> Run(const ReplayFlags& flags) {
  absl::StatusOr<ReplayPlan> plan = MakeReplayPlan(flags);
  if (!plan.ok()) return Failure{kExitUsage, plan.status()};
  absl::StatusOr<Trace> trace = Load(*plan);
  if (!trace.ok()) return Failure{kExitRuntime, trace.status()};
  if (trace->num_refs() == 0) {
    return Failure{kExitRuntime, absl::InvalidArgumentError(fmt::format(
                                     "{}: the trace holds no block references: nothing to replay",
                                     plan->trace_path))};
  }
  absl::StatusOr<ResolvedTiers> resolved = ResolveTiers(*plan, *trace);
  if (!resolved.ok()) return Failure{kExitUsage, resolved.status()};
  const absl::Status status = plan->sweep_mode ? RunSweepMode(*plan, *trace, *resolved)
                                               : RunReplay(*plan, *trace, *resolved);
  if (!status.ok()) return Failure{kExitRuntime, status};
  return std::nullopt;
}

}  // namespace

void RegisterReplayCommand(CLI::App& app, int* exit_code) {
  CLI::App* sub = app.add_subcommand(
      "replay", "Replay a request trace through simulated cache tiers and report hit ratios");
  auto flags = std::make_shared<ReplayFlags>();
  AddReplayFlags(*sub, flags.get());
  // Unknown arguments are reported by us, with exit code 2, rather than by CLI11.
  sub->allow_extras();
  sub->callback([sub, flags, exit_code] {
    if (!sub->remaining().empty()) {
      std::fprintf(stderr, "kvtier replay: unknown argument '%s' (see kvtier replay --help)\n",
                   sub->remaining().front().c_str());
      *exit_code = kExitUsage;
      return;
    }
    if (std::optional<Failure> failure = Run(*flags)) {
      std::fprintf(stderr, "kvtier replay: %s\n", std::string(failure->status.message()).c_str());
      *exit_code = failure->exit_code;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace kvtier::replay
