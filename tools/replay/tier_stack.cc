#include "tools/replay/tier_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <utility>

#include "common/huge_pages.h"
#include "index/leaf_tracker.h"

namespace kvtier::replay {

struct TierStack::Tier {
  TierConfig config;
  std::unique_ptr<EvictionPolicy> policy;
  std::unique_ptr<AdmissionPolicy> admission;  // null: admit all without a virtual call
  TierCounters counters;
  uint8_t bit = 0;
  uint64_t size = 0;  // resident blocks; mirrors policy->Size() without a virtual call
  // Only policies with ghost history read ghost keys (eviction_policy.h: S3-FIFO, ARC). For the
  // others we pass 0 and save a random read of an 8-byte-per-block array on every insert.
  bool needs_ghost_keys = true;
  std::unique_ptr<LeafTracker> leaves;  // leaf-first mode only
};

absl::Status ValidateTiers(const std::vector<TierConfig>& tiers) {
  if (tiers.empty()) return absl::InvalidArgumentError("no tiers configured");
  if (tiers.size() > kMaxTiers) {
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
    : ghost_keys_(ghost_keys), prefetch_(ghost_keys.size() >= kPrefetchMinBlocks) {
  ReserveHuge(mask_, ghost_keys.size());  // read at random: huge pages spare TLB misses
  mask_.assign(ghost_keys.size(), 0);
}

TierStack::~TierStack() = default;

absl::StatusOr<std::unique_ptr<TierStack>> TierStack::Create(
    const std::vector<TierConfig>& tiers, absl::Span<const uint64_t> ghost_keys) {
  KVTIER_RETURN_IF_ERROR(ValidateTiers(tiers));
  if (tiers[0].eviction.policy == "opt") {
    return absl::InvalidArgumentError("policy opt is simulated by SimulateOpt, not a TierStack");
  }
  std::unique_ptr<TierStack> stack(new TierStack(ghost_keys));
  for (size_t t = 0; t < tiers.size(); ++t) {
    auto tier = std::make_unique<Tier>();
    tier->config = tiers[t];
    tier->bit = static_cast<uint8_t>(1u << t);
    const std::string& policy = tiers[t].eviction.policy;
    tier->needs_ghost_keys = policy != "lru" && policy != "fifo" && policy != "sieve";
    EvictionConfig eviction = tiers[t].eviction;
    eviction.capacity_blocks = tiers[t].capacity_blocks;
    KVTIER_ASSIGN_OR_RETURN(tier->policy, MakeEvictionPolicy(eviction));
    if (tiers[t].admission.policy != "all") {
      AdmissionConfig admission = tiers[t].admission;
      // Default window: the capacity, but no more than the trace's blocks (a larger one only costs
      // memory, and a huge capacity would exceed the filter's limit).
      if (admission.window_blocks == 0) {
        admission.window_blocks =
            std::min<uint64_t>(tiers[t].capacity_blocks, std::max<size_t>(ghost_keys.size(), 1));
      }
      KVTIER_ASSIGN_OR_RETURN(tier->admission, MakeAdmissionPolicy(admission));
    }
    if (tiers[t].leaf_first) {
      tier->leaves = std::make_unique<LeafTracker>();
      if (stack->parent_.empty()) stack->parent_.assign(ghost_keys.size(), kNoParent);
    }
    stack->tiers_.push_back(std::move(tier));
  }
  stack->top_policy_ = stack->tiers_[0]->policy.get();
  return stack;
}

void TierStack::Prefetch(absl::Span<const BlockId> ids) const {
  if (!prefetch_) return;
  for (BlockId id : ids) __builtin_prefetch(mask_.data() + id);
  top_policy_->Prefetch(ids);
}

size_t TierStack::Size(size_t tier) const { return tiers_[tier]->size; }
TierCounters& TierStack::counters(size_t tier) { return tiers_[tier]->counters; }
const TierCounters& TierStack::counters(size_t tier) const { return tiers_[tier]->counters; }

bool TierStack::Admit(size_t t, BlockId id) {
  Tier& tier = *tiers_[t];
  if (tier.admission == nullptr || tier.admission->Admit(ghost_keys_[id])) return true;
  ++tier.counters.rejected;
  return false;
}

void TierStack::ReferenceMiss(BlockId id, BlockId parent) {
  const uint8_t mask = mask_[id];
  // A block keeps the parent it had when it entered the stack, so every tier's child counts
  // increase and decrease on the same parent even if a trace is not perfectly prefix-chained.
  // Dense ids follow first appearance, so a real prefix parent always has the smaller id; a link
  // to a larger or equal id (a hash id repeated within a request) could close a cycle of blocks
  // that are never leaves and never evictable, so it is not made.
  if (!parent_.empty() && mask == 0) parent_[id] = parent < id ? parent : kNoParent;
  if (mask != 0) {
    Tier& lower = *tiers_[std::countr_zero(mask)];
    ++lower.counters.promoted;
    lower.policy->Touch(id);
    InsertInto(0, id);
    return;
  }
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (Admit(t, id)) {
      ++tiers_[t]->counters.written;
      InsertInto(t, id);
      return;
    }
  }
}

void TierStack::InsertInto(size_t t, BlockId id) {
  Tier& tier = *tiers_[t];
  tier.policy->Insert(id, tier.needs_ghost_keys ? ghost_keys_[id] : 0);
  mask_[id] |= tier.bit;
  ++tier.size;
  if (tier.leaves != nullptr) {
    tier.leaves->Add(id,
                     parent_[id] == kNoParent ? std::nullopt : std::optional<BlockId>(parent_[id]));
  }
  if (tier.size > tier.config.capacity_blocks) EvictFrom(t);
}

void TierStack::EvictFrom(size_t t) {
  Tier& tier = *tiers_[t];
  std::optional<BlockId> victim;
  if (tier.leaves == nullptr) {
    victim = tier.policy->Evict([](BlockId) { return true; });
  } else {
    victim = tier.policy->Evict([&tier](BlockId id) { return tier.leaves->IsLeaf(id); });
  }
  if (!victim) return;  // nothing evictable; the tier stays over capacity until something is
  const BlockId v = *victim;
  // The victims of a large tier were referenced long ago, so their residency bytes are cold:
  // start loading the one the policy expects to evict a few evictions from now.
  if (prefetch_) {
    if (const BlockId next = tier.policy->UpcomingVictim(); next < mask_.size()) {
      __builtin_prefetch(mask_.data() + next);
    }
  }
  ++tier.counters.evictions;
  --tier.size;
  mask_[v] &= static_cast<uint8_t>(~tier.bit);
  if (tier.leaves != nullptr) tier.leaves->Remove(v);
  const size_t next = t + 1;
  if (next == tiers_.size() || (mask_[v] & tiers_[next]->bit)) return;  // deleted, or clean
  if (!Admit(next, v)) return;
  ++tier.counters.demoted;
  InsertInto(next, v);
}

}  // namespace kvtier::replay
