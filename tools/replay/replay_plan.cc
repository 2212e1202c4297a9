#include "tools/replay/replay_plan.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <tuple>
#include <utility>

namespace kvtier::replay {
namespace {

absl::Status Usage(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

bool Has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

absl::Status ParseInput(const ReplayFlags& f, ReplayPlan* plan) {
  if (f.trace.empty()) {
    return Usage(
        "--trace is required: a Mooncake or Bailian JSONL file (.gz/.zst too), or - for stdin");
  }
  plan->trace_path = f.trace;
  absl::StatusOr<TraceFormat> format = ParseTraceFormat(f.format);
  if (!format.ok())
    return Usage(fmt::format("--format: unknown format '{}' (auto, mooncake, bailian)", f.format));
  plan->load.format = *format;
  plan->load.skip_bad = f.skip_bad;
  if (!f.block_tokens.empty()) {
    KVTIER_ASSIGN_OR_RETURN(uint64_t tokens, ParseUint("--block-tokens", f.block_tokens));
    if (tokens == 0 || tokens > (1u << 20)) return Usage("--block-tokens: must be in 1..1048576");
    plan->load.block_tokens = static_cast<uint32_t>(tokens);
  }
  if (!f.model.empty() && !f.block_bytes.empty()) {
    return Usage("--model and --block-bytes both give the block size: use one");
  }
  if (!f.model.empty()) plan->model_path = f.model;
  if (!f.block_bytes.empty()) {
    KVTIER_ASSIGN_OR_RETURN(plan->block_bytes, ParseUint("--block-bytes", f.block_bytes));
    if (plan->block_bytes == 0) return Usage("--block-bytes: must be > 0");
  }
  return absl::OkStatus();
}

// The single tier of --capacity-blocks / --capacity-bytes.
absl::StatusOr<TierSpec> SingleTier(const ReplayFlags& f) {
  TierSpec spec;
  spec.config.eviction.policy = f.policy;
  spec.config.admission.policy = f.admission;
  spec.config.leaf_first = f.leaf_first;
  if (!f.capacity_blocks.empty()) {
    KVTIER_ASSIGN_OR_RETURN(uint64_t blocks, ParseUint("--capacity-blocks", f.capacity_blocks));
    if (blocks == 0) return Usage("--capacity-blocks: must be > 0");
    spec.capacity = {Capacity::Unit::kBlocks, double(blocks)};
  } else {
    KVTIER_ASSIGN_OR_RETURN(spec.capacity, ParseCapacity("--capacity-bytes", f.capacity_bytes));
    spec.capacity.unit = Capacity::Unit::kBytes;  // a bare number means bytes here
  }
  return spec;
}

absl::Status ParseTiers(const ReplayFlags& f, ReplayPlan* plan) {
  KVTIER_RETURN_IF_ERROR(CheckPolicyName("--policy", f.policy));
  KVTIER_RETURN_IF_ERROR(CheckAdmissionName("--admission", f.admission));
  if (!f.admission_window.empty()) {
    KVTIER_ASSIGN_OR_RETURN(plan->admission_window,
                            ParseUint("--admission-window", f.admission_window));
    if (plan->admission_window == 0) return Usage("--admission-window: must be > 0");
    plan->sweep.admission_window = plan->admission_window;
  }
  const int given = !f.capacity_blocks.empty() + !f.capacity_bytes.empty() + !f.tiers.empty();
  if (given > 1) {
    return Usage(
        "--capacity-blocks, --capacity-bytes and --tier are exclusive: give one (a --tier "
        "spec carries its own capacity)");
  }
  if (f.sweep) {
    if (given != 0)
      return Usage("--sweep takes its capacities from --sweep-capacities, not --capacity-*/--tier");
    return absl::OkStatus();
  }
  if (given == 0)
    return Usage("give a capacity: --capacity-blocks N, --capacity-bytes SIZE or --tier SPEC");
  if (f.tiers.empty()) {
    KVTIER_ASSIGN_OR_RETURN(TierSpec spec, SingleTier(f));
    spec.config.admission.window_blocks = plan->admission_window;
    plan->tiers.push_back(std::move(spec));
  }
  const TierDefaults defaults{f.policy, f.admission, f.leaf_first, plan->admission_window};
  for (size_t i = 0; i < f.tiers.size(); ++i) {
    KVTIER_ASSIGN_OR_RETURN(TierSpec spec, ParseTierSpec(i, f.tiers[i], defaults));
    plan->tiers.push_back(std::move(spec));
  }
  if (plan->tiers.size() > static_cast<size_t>(kMaxTiers))
    return Usage(fmt::format("--tier: at most {} tiers", kMaxTiers));
  for (auto [flag, name, index] :
       {std::tuple{"--put-tier", &f.put_tier, &plan->shape.put_tier},
        std::tuple{"--read-tier", &f.read_tier, &plan->shape.read_tier}}) {
    if (name->empty()) continue;
    auto it = std::find_if(plan->tiers.begin(), plan->tiers.end(),
                           [&](const TierSpec& t) { return t.config.name == *name; });
    if (it == plan->tiers.end()) {
      return Usage(fmt::format("{}: no tier named '{}'", flag, *name));
    }
    *index = static_cast<size_t>(it - plan->tiers.begin());
  }
  for (const TierSpec& spec : plan->tiers) {
    if (spec.config.eviction.policy == "opt" && plan->tiers.size() > 1) {
      return Usage(fmt::format("--policy opt (Belady) simulates a single tier only; tier {} has it",
                               spec.config.name));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseModes(const ReplayFlags& f, ReplayPlan* plan) {
  plan->json = f.json;
  if (!f.compare.empty()) {
    KVTIER_ASSIGN_OR_RETURN(plan->compare, SplitList("--compare", f.compare));
    for (const std::string& p : plan->compare)
      KVTIER_RETURN_IF_ERROR(CheckPolicyName("--compare", p));
    if (Has(plan->compare, "opt") && plan->tiers.size() > 1) {
      return Usage("--compare: opt (Belady) simulates a single tier only; drop it or use one tier");
    }
  }
  if (!f.prefill_tokens_per_s.empty()) {
    KVTIER_ASSIGN_OR_RETURN(plan->cost.prefill_tokens_per_s,
                            ParsePositive("--prefill-tokens-per-s", f.prefill_tokens_per_s));
  }
  if (!f.read_gbps.empty()) {
    KVTIER_ASSIGN_OR_RETURN(plan->cost.read_gbps, ParseGbpsList("--read-gbps", f.read_gbps));
  }
  if (absl::Status valid = plan->cost.Validate(); !valid.ok()) {
    return Usage(std::string(valid.message()));
  }
  return absl::OkStatus();
}

absl::Status ParseSweep(const ReplayFlags& f, ReplayPlan* plan) {
  plan->sweep_mode = f.sweep;
  plan->sweep_out = f.sweep_out;
  if (f.sweep_out.empty()) return Usage("--sweep-out: empty prefix");
  if (!plan->compare.empty()) plan->sweep.policies = plan->compare;
  plan->sweep.admissions = {f.admission};
  plan->sweep.leaf_first = f.leaf_first;
  if (!f.sweep_admissions.empty()) {
    KVTIER_ASSIGN_OR_RETURN(plan->sweep.admissions,
                            SplitList("--sweep-admissions", f.sweep_admissions));
    for (const std::string& a : plan->sweep.admissions) {
      KVTIER_RETURN_IF_ERROR(CheckAdmissionName("--sweep-admissions", a));
    }
  }
  if (!f.sweep_capacities.empty()) {
    KVTIER_ASSIGN_OR_RETURN(std::vector<std::string> items,
                            SplitList("--sweep-capacities", f.sweep_capacities));
    for (const std::string& item : items) {
      KVTIER_ASSIGN_OR_RETURN(Capacity c, ParseCapacity("--sweep-capacities", item));
      plan->sweep_capacities.push_back(c);
    }
  }
  if (!f.threads.empty()) {
    KVTIER_ASSIGN_OR_RETURN(uint64_t threads, ParseUint("--threads", f.threads));
    plan->sweep.threads = static_cast<unsigned>(std::min<uint64_t>(threads, 1024));
  }
  return absl::OkStatus();
}

uint64_t BlockBytes(const ReplayPlan& plan, uint32_t block_tokens) {
  return plan.model ? plan.model->KvBytesPerToken() * block_tokens : plan.block_bytes;
}

}  // namespace

absl::StatusOr<ReplayPlan> MakeReplayPlan(const ReplayFlags& flags) {
  ReplayPlan plan;
  KVTIER_RETURN_IF_ERROR(ParseInput(flags, &plan));
  KVTIER_RETURN_IF_ERROR(ParseTiers(flags, &plan));
  KVTIER_RETURN_IF_ERROR(ParseModes(flags, &plan));
  KVTIER_RETURN_IF_ERROR(ParseSweep(flags, &plan));
  if (plan.model_path) {
    absl::StatusOr<ModelShape> shape = LoadModelShape(*plan.model_path);
    if (!shape.ok())
      return Usage(fmt::format("--model: {}", std::string(shape.status().message())));
    plan.model = *std::move(shape);
  }
  const bool needs_block_bytes =
      std::any_of(plan.tiers.begin(), plan.tiers.end(),
                  [](const TierSpec& t) { return t.capacity.unit == Capacity::Unit::kBytes; }) ||
      std::any_of(plan.sweep_capacities.begin(), plan.sweep_capacities.end(),
                  [](const Capacity& c) { return c.unit == Capacity::Unit::kBytes; });
  if (needs_block_bytes && !plan.model_path && plan.block_bytes == 0) {
    return Usage(
        "a capacity in bytes needs the KV size of a block: give --model "
        "configs/models/NAME.json or --block-bytes");
  }
  return plan;
}

namespace {

// The index of the tier a --tier spec's climb_to names: one above it; -1 when not given.
absl::StatusOr<int> ClimbTarget(const ReplayPlan& plan, size_t i, const std::string& where) {
  const std::string& name = plan.tiers[i].climb_to;
  if (name.empty()) return -1;
  for (size_t above = 0; above < i; ++above) {
    if (plan.tiers[above].config.name == name) return static_cast<int>(above);
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: climb_to: no tier above it is named '{}'", where, name));
}

}  // namespace

absl::StatusOr<ResolvedTiers> ResolveTiers(const ReplayPlan& plan, const Trace& trace) {
  ResolvedTiers out;
  out.block_bytes = BlockBytes(plan, trace.block_tokens);
  for (size_t i = 0; i < plan.tiers.size(); ++i) {
    const TierSpec& spec = plan.tiers[i];
    const std::string where = plan.tiers.size() == 1 && spec.config.name == "T0"
                                  ? "capacity"
                                  : fmt::format("--tier #{} ({})", i + 1, spec.config.name);
    TierConfig tier = spec.config;
    KVTIER_ASSIGN_OR_RETURN(tier.climb_to, ClimbTarget(plan, i, where));
    KVTIER_ASSIGN_OR_RETURN(
        tier.capacity_blocks,
        ResolveCapacity(where, spec.capacity, out.block_bytes, trace.num_blocks()));
    out.tiers.push_back(std::move(tier));
    out.read_gbps.push_back(spec.read_gbps ? *spec.read_gbps : plan.cost.ReadBytesPerS(i) / 1e9);
    out.read_latency_s.push_back(spec.latency_us * 1e-6);
  }
  for (const Capacity& c : plan.sweep_capacities) {
    KVTIER_ASSIGN_OR_RETURN(uint64_t blocks, ResolveCapacity("--sweep-capacities", c,
                                                             out.block_bytes, trace.num_blocks()));
    out.sweep_capacities.push_back(blocks);
  }
  // Curves are drawn left to right: sorted, each capacity once.
  std::sort(out.sweep_capacities.begin(), out.sweep_capacities.end());
  out.sweep_capacities.erase(std::unique(out.sweep_capacities.begin(), out.sweep_capacities.end()),
                             out.sweep_capacities.end());
  if (plan.sweep_mode && out.sweep_capacities.empty()) {
    out.sweep_capacities = DefaultSweepCapacities(std::max<uint64_t>(trace.num_blocks(), 1));
  }
  return out;
}

}  // namespace kvtier::replay
