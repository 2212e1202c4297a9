#include "tools/replay/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <mutex>
#include <thread>

#include "index/belady.h"
#include "tools/replay/plot.h"

namespace kvtier::replay {
namespace {

std::vector<SweepPoint> PlanPoints(const SweepConfig& config, uint64_t unique_blocks) {
  std::vector<SweepPoint> points;
  for (const std::string& policy : config.policies) {
    const bool opt = policy == "opt";
    for (size_t a = 0; a < (opt ? 1 : config.admissions.size()); ++a) {
      for (uint64_t capacity : config.capacities) {
        SweepPoint p;
        p.policy = policy;
        p.admission = opt ? "-" : config.admissions[a];
        p.capacity_blocks = capacity;
        p.capacity_fraction = unique_blocks ? double(capacity) / double(unique_blocks) : 0.0;
        points.push_back(std::move(p));
      }
    }
  }
  return points;
}

TierConfig PointTier(const SweepPoint& p, const SweepConfig& config) {
  TierConfig tier;
  tier.capacity_blocks = p.capacity_blocks;
  tier.eviction.policy = p.policy;
  tier.admission.policy = p.policy == "opt" ? "all" : p.admission;
  // 0 = capacity, exactly as `replay` builds the same tier.
  tier.admission.window_blocks = config.admission_window;
  tier.leaf_first = config.leaf_first && p.policy != "opt";
  return tier;
}

}  // namespace

std::string SeriesLabel(const SweepPoint& p) {
  return p.admission == "-" || p.admission == "all" ? p.policy : p.policy + "+" + p.admission;
}

std::vector<uint64_t> DefaultSweepCapacities(uint64_t unique_blocks, int points) {
  std::vector<uint64_t> capacities;
  for (int k = 0; k < points; ++k) {
    const double fraction = 0.01 * std::pow(100.0, double(k) / double(std::max(points - 1, 1)));
    const auto blocks = static_cast<uint64_t>(std::llround(fraction * double(unique_blocks)));
    capacities.push_back(std::max<uint64_t>(blocks, 1));
  }
  capacities.erase(std::unique(capacities.begin(), capacities.end()), capacities.end());
  return capacities;
}

absl::StatusOr<std::vector<SweepPoint>> RunSweep(
    const Trace& trace, const SweepConfig& in,
    const std::function<void(uint64_t, uint64_t)>& on_progress) {
  SweepConfig config = in;
  if (config.capacities.empty()) config.capacities = DefaultSweepCapacities(trace.num_blocks());
  std::vector<SweepPoint> points = PlanPoints(config, trace.num_blocks());
  for (const SweepPoint& p : points) KVTIER_RETURN_IF_ERROR(ValidateTiers({PointTier(p, config)}));
  std::vector<uint32_t> next_use;
  if (std::find(config.policies.begin(), config.policies.end(), "opt") != config.policies.end()) {
    next_use = NextUseByRequest(trace.refs, trace.request_begin, trace.num_blocks());
  }
  SimOptions options;
  options.next_use = &next_use;
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;  // guards `status` and on_progress
  absl::Status status;
  auto worker = [&] {
    for (size_t i = next++; i < points.size(); i = next++) {
      absl::StatusOr<SimResult> r = Simulate(trace, {PointTier(points[i], config)}, options);
      std::lock_guard<std::mutex> lock(mu);
      if (!r.ok()) {
        status.Update(r.status());
        continue;
      }
      points[i].block_hit_ratio = r->BlockHitRatio();
      points[i].prefix_hit_ratio = r->PrefixHitRatio();
      if (on_progress) on_progress(++done, points.size());
    }
  };
  unsigned threads =
      config.threads ? config.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, points.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  KVTIER_RETURN_IF_ERROR(status);
  return points;
}

absl::Status WriteSweepCsv(const std::vector<SweepPoint>& points, const std::string& path) {
  std::ofstream out(path);
  if (!out) return absl::InternalError(fmt::format("{}: cannot open for writing", path));
  out << "policy,admission,capacity_blocks,capacity_fraction,block_hit_ratio,block_miss_ratio,"
         "prefix_hit_ratio,prefix_miss_ratio\n";
  for (const SweepPoint& p : points) {
    out << fmt::format("{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", p.policy, p.admission,
                       p.capacity_blocks, p.capacity_fraction, p.block_hit_ratio,
                       1.0 - p.block_hit_ratio, p.prefix_hit_ratio, 1.0 - p.prefix_hit_ratio);
  }
  out.close();
  if (!out) return absl::InternalError(fmt::format("{}: write failed", path));
  return absl::OkStatus();
}

absl::Status WriteSweepPlot(const std::vector<SweepPoint>& points, const std::string& title,
                            const std::string& path) {
  PlotSpec spec;
  spec.title = title;
  spec.x_label = "capacity (fraction of unique blocks)";
  spec.y_label = "prefix miss ratio";
  spec.log_x = true;
  for (const SweepPoint& p : points) {
    const std::string label = SeriesLabel(p);
    if (spec.series.empty() || spec.series.back().label != label)
      spec.series.push_back({label, {}, {}});
    spec.series.back().x.push_back(p.capacity_fraction);
    spec.series.back().y.push_back(1.0 - p.prefix_hit_ratio);
  }
  return WritePlotPng(spec, path);
}

}  // namespace kvtier::replay
