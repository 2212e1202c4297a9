// `kvtier replay --sweep`: miss-ratio curves. Simulates a single tier at each capacity of a grid
// with each policy (and admission filter), all over one trace loaded once, points in parallel;
// writes one CSV row per point and a PNG with one prefix-miss-ratio curve per policy (opt
// included).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/replay/simulator.h"

namespace kvtier::replay {

struct SweepConfig {
  std::vector<std::string> policies = {"lru", "fifo", "sieve", "s3fifo", "arc", "opt"};
  std::vector<std::string> admissions = {"all"};  // "opt" runs once per capacity, without one
  std::vector<uint64_t> capacities;               // blocks; empty = DefaultSweepCapacities
  bool leaf_first = false;
  uint64_t admission_window = 0;  // blocks; 0 = each point's capacity
  unsigned threads = 0;           // 0 = hardware concurrency
};

struct SweepPoint {
  std::string policy;
  std::string admission;  // "-" for opt
  uint64_t capacity_blocks = 0;
  double capacity_fraction = 0;  // of the trace's unique blocks
  double block_hit_ratio = 0;
  double prefix_hit_ratio = 0;
};

// "lru", "s3fifo+second": the policy, and the admission filter unless it admits all.
std::string SeriesLabel(const SweepPoint& point);

// A geometric grid of `points` fractions of `unique_blocks`, from 1% to 100%, deduplicated, each
// at least one block.
std::vector<uint64_t> DefaultSweepCapacities(uint64_t unique_blocks, int points = 12);

// Runs every point; `on_progress(points done, points total)`. Points come back ordered by policy,
// admission, capacity. Errors (a bad policy name) name the policy.
absl::StatusOr<std::vector<SweepPoint>> RunSweep(
    const Trace& trace, const SweepConfig& config,
    const std::function<void(uint64_t, uint64_t)>& on_progress);

// CSV header: policy,admission,capacity_blocks,capacity_fraction,block_hit_ratio,
// block_miss_ratio,prefix_hit_ratio,prefix_miss_ratio.
absl::Status WriteSweepCsv(const std::vector<SweepPoint>& points, const std::string& path);
// Prefix miss ratio against capacity fraction (log x), one series per policy+admission.
absl::Status WriteSweepPlot(const std::vector<SweepPoint>& points, const std::string& title,
                            const std::string& path);

}  // namespace kvtier::replay
