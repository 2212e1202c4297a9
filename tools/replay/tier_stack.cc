#include "tools/replay/tier_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace kvtier::replay {

absl::Status ValidateTiers(const std::vector<TierConfig>& tiers) {
  if (tiers.empty()) return absl::InvalidArgumentError("no tiers configured");
  if (tiers.size() > static_cast<size_t>(kMaxTiers)) {
    return absl::InvalidArgumentError(
        fmt::format("{} tiers configured; at most {} are supported", tiers.size(), kMaxTiers));
  }
  for (const TierConfig& tier : tiers) {
    if (tier.capacity_blocks == 0) {
      return absl::InvalidArgumentError(
          fmt::format("tier {}: capacity must be at least one block", tier.name));
    }
    if (tier.eviction.policy == "opt") {
      if (tiers.size() != 1) {
        return absl::InvalidArgumentError(
            fmt::format("tier {}: policy opt (Belady) simulates a single tier only", tier.name));
      }
      continue;
    }
    EvictionConfig eviction = tier.eviction;
    eviction.capacity_blocks = tier.capacity_blocks;
    if (absl::Status s = eviction.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("tier {}: {}", tier.name, std::string(s.message())));
    }
    if (absl::Status s = tier.admission.Validate(); !s.ok() && tier.admission.window_blocks != 0) {
      return absl::InvalidArgumentError(
          fmt::format("tier {}: {}", tier.name, std::string(s.message())));
    }
  }
  return absl::OkStatus();
}

TierStack::TierStack(absl::Span<const uint64_t> ghost_keys)
    : ghost_keys_(ghost_keys), prefetch_(ghost_keys.size() >= kPrefetchMinBlocks) {}

TierStack::~TierStack() = default;

absl::StatusOr<std::unique_ptr<TierStack>> TierStack::Create(const std::vector<TierConfig>& tiers,
                                                             absl::Span<const uint64_t> ghost_keys,
                                                             StackShape shape) {
  KVTIER_RETURN_IF_ERROR(ValidateTiers(tiers));
  if (tiers[0].eviction.policy == "opt") {
    return absl::InvalidArgumentError("policy opt is simulated by SimulateOpt, not a TierStack");
  }
  if (shape.put_tier >= tiers.size() || shape.read_tier >= tiers.size()) {
    return absl::InvalidArgumentError(
        fmt::format("put tier #{} / read tier #{}: the stack has {} tiers", shape.put_tier + 1,
                    shape.read_tier + 1, tiers.size()));
  }
  std::vector<RungOptions> rungs;
  for (const TierConfig& tier : tiers) {
    RungOptions rung;
    rung.name = tier.name;
    rung.capacity_slots = tier.capacity_blocks;
    rung.policy.eviction = tier.eviction;
    rung.policy.admission = tier.admission;
    // Default window: the capacity, but no more than the trace's blocks (a larger one only costs
    // memory, and a huge capacity would exceed the filter's limit).
    if (rung.policy.admission.window_blocks == 0) {
      rung.policy.admission.window_blocks =
          std::min<uint64_t>(tier.capacity_blocks, std::max<size_t>(ghost_keys.size(), 1));
    }
    rung.policy.leaf_first = tier.leaf_first;
    rung.policy.high_watermark = tier.high_watermark;
    rung.policy.low_watermark = tier.low_watermark;
    rung.climb_to = tier.climb_to;
    rungs.push_back(std::move(rung));
  }
  std::unique_ptr<TierStack> stack(new TierStack(ghost_keys));
  KVTIER_ASSIGN_OR_RETURN(stack->ladder_, Ladder::Create(std::move(rungs), ghost_keys.size()));
  stack->put_ = static_cast<int>(shape.put_tier);
  stack->read_ = static_cast<int>(shape.read_tier);
  stack->read_bit_ = static_cast<TierMask>(1u << stack->read_);
  stack->put_is_bottom_ = stack->ladder_->Below(stack->put_) == Ladder::kNone;
  return stack;
}

TierCounters TierStack::counters(size_t tier) const {
  const RungCounters& c = ladder_->counters(static_cast<int>(tier));
  TierCounters out;
  out.promoted = c.promoted_out;
  out.demoted = c.moved_down;
  out.written = c.born;
  out.evictions = c.evictions;
  out.rejected = c.rejected + c.births_refused;
  return out;
}

RungCounters TierStack::rung_counters(size_t tier) const {
  RungCounters c = ladder_->counters(static_cast<int>(tier));
  if (static_cast<int>(tier) == read_) c.hits += read_hits_;
  return c;
}

void TierStack::ReferenceMiss(BlockId id, BlockId parent) {
  const TierMask mask = ladder_->MaskUnchecked(id);
  if (mask != 0) return Read(id, mask);
  // A put. Everything from here to the end of SettleBottom is one function: it runs on every miss,
  // and the calls' register saves were a third of its instructions.
  const uint64_t ghost = GhostKey(put_, id);
  if (!ladder_->AdmitBirth(put_, ghost)) return;
  // Dense ids follow first appearance, so a real prefix parent always has the smaller id; a link
  // to a larger or equal id (a hash id repeated within a request) could close a cycle of blocks
  // that are never leaves and never evictable, so it is not made.
  ladder_->Enter(put_, id, ghost, parent < id ? parent : kNoParent);
  ++ladder_->counters(put_).born;
  if (put_is_bottom_) {
    SettleBottom(put_);
  } else {
    SettleRounds(put_);
  }
}

void TierStack::Read(BlockId id, TierMask mask) {
  // One step at a time, as the daemon's mover copies it.
  int source = Ladder::ReadSource(mask, read_);
  while (source != read_) {
    const int step = ladder_->NextStep(source, read_);
    ladder_->Enter(step, id, GhostKey(step, id), ladder_->Parent(id));
    ladder_->Touch(source, id);
    ++ladder_->counters(source).promoted_out;
    ++ladder_->counters(step).gets_promoted;
    Settle(step);
    source = step;
  }
}

// Only `entered` and the rungs below it can be over their watermarks: the last Settle left every
// rung with ShouldShed false (a rung stops only at or below its low watermark, or empty), since
// then only `entered` grew, and only victims moving down grow the rungs below it. Checking the
// rungs above would change nothing, and costs a call per rung on every miss. One function with the
// shedding step inlined: this runs on every miss, and the calls' register saves were a third of it.
void TierStack::SettleRounds(int entered) {
  const std::vector<int>& order = ladder_->ShedOrder();  // bottom-up: `entered` and below first
  for (bool shed = true; shed;) {
    shed = false;
    for (int r : order) {
      if (r < entered) break;
      if (!ladder_->ShouldShed(r, ladder_->Size(r))) continue;
      const std::optional<BlockId> victim = ladder_->ChooseAny(r);
      if (!victim) continue;
      shed = true;
      if (ShedVictim(r, *victim) == VictimFate::kMoveDown) break;  // a round ends at a move down
    }
  }
}

VictimFate TierStack::ShedVictim(int r, BlockId v) {
  // Victims were used long ago: their ghost key is a cache miss, paid only if a policy reads it.
  const int below = ladder_->Below(r);
  const uint64_t ghost = below != Ladder::kNone ? GhostKey(below, v) : 0;
  const VictimFate fate = ladder_->FateOf(r, ladder_->Mask(v), ghost, /*below_admitting=*/true);
  if (fate == VictimFate::kDrop) {
    ++ladder_->counters(r).dropped;
  } else if (fate == VictimFate::kMoveDown) {
    ladder_->Enter(below, v, ghost, ladder_->Parent(v));
    ++ladder_->counters(r).moved_down;
  }
  return fate;
}

}  // namespace kvtier::replay
