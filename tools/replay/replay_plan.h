// The flags of `kvtier replay` and what they mean once checked: flags (strings, as typed) ->
// ReplayPlan (validated before the trace is read; errors are exit code 2 and name the flag) ->
// ResolvedTiers (capacities in blocks and the block size, once the trace is loaded).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/model_config.h"
#include "tools/replay/cost_model.h"
#include "tools/replay/replay_args.h"
#include "tools/replay/sweep.h"
#include "tools/replay/trace_reader.h"

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::replay {

// The model shape is the engine's (engine/model_config.h): one parser of config.json.
using engine::LoadModelShape;
using engine::ModelShape;

// Every flag as the user typed it. Values are strings so that our own parsers report bad ones.
struct ReplayFlags {
  std::string trace, format = "auto", block_tokens;
  bool skip_bad = false;
  std::string policy = "lru", admission = "all";
  bool leaf_first = false;
  std::string admission_window;  // blocks; empty = each tier's capacity
  std::string capacity_blocks, capacity_bytes;
  std::vector<std::string> tiers;
  std::string put_tier, read_tier;  // tier names; empty = the first tier
  std::string model, block_bytes;
  std::string compare;
  bool json = false;
  bool sweep = false;
  std::string sweep_out = "sweep", sweep_capacities, sweep_admissions, threads;
  std::string prefill_tokens_per_s, read_gbps;
};

// Declares the flags on `sub`, bound to `*flags` (which must outlive parsing).
void AddReplayFlags(CLI::App& sub, ReplayFlags* flags);

struct ReplayPlan {
  std::string trace_path;
  TraceLoadOptions load;
  std::vector<TierSpec> tiers;  // top first; capacities not yet in blocks
  StackShape shape;             // --put-tier / --read-tier as indexes into `tiers`
  std::optional<std::string> model_path;
  uint64_t admission_window = 0;  // --admission-window; 0 = each tier's capacity
  // Loaded from model_path by MakeReplayPlan, before any trace is read, so a bad model file is
  // reported at once.
  std::optional<ModelShape> model;
  uint64_t block_bytes = 0;          // from --block-bytes; 0 = unset
  CostModel cost;                    // read_gbps as given by --read-gbps (may be short)
  std::vector<std::string> compare;  // empty = one run
  bool json = false;
  bool sweep_mode = false;
  SweepConfig sweep;                       // capacities filled by ResolveTiers
  std::vector<Capacity> sweep_capacities;  // empty = the default grid
  std::string sweep_out;
};

// Checks every flag and their combinations. InvalidArgument naming the flag.
absl::StatusOr<ReplayPlan> MakeReplayPlan(const ReplayFlags& flags);

struct ResolvedTiers {
  std::vector<TierConfig> tiers;
  uint64_t block_bytes = 0;            // 0 = unknown
  std::vector<double> read_gbps;       // one per tier
  std::vector<double> read_latency_s;  // one per tier
  std::vector<uint64_t> sweep_capacities;
};

// Fixes capacities in blocks now that the trace (its unique blocks and block size) is known;
// loads --model. InvalidArgument naming the flag or tier.
absl::StatusOr<ResolvedTiers> ResolveTiers(const ReplayPlan& plan, const Trace& trace);

}  // namespace kvtier::replay
