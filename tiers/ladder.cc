#include "tiers/ladder.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <utility>

#include "common/huge_pages.h"

namespace kvtier {
namespace {

bool InUnitInterval(double v) { return v > 0.0 && v <= 1.0; }  // false for NaN

absl::Status Prefixed(const std::string& prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), fmt::format("{}.{}", prefix, std::string(status.message())));
}

TierMask Bit(int r) { return static_cast<TierMask>(1u << r); }

}  // namespace

absl::Status TierPolicyOptions::Validate(const std::string& prefix) const {
  if (!InUnitInterval(high_watermark)) {
    return absl::InvalidArgumentError(
        fmt::format("{}.high_watermark: {} is not in (0, 1]", prefix, high_watermark));
  }
  if (!InUnitInterval(low_watermark)) {
    return absl::InvalidArgumentError(
        fmt::format("{}.low_watermark: {} is not in (0, 1]", prefix, low_watermark));
  }
  if (low_watermark > high_watermark) {
    return absl::InvalidArgumentError(
        fmt::format("{}.low_watermark: {} is above {}.high_watermark ({})", prefix, low_watermark,
                    prefix, high_watermark));
  }
  EvictionConfig eviction_copy = eviction;
  eviction_copy.capacity_blocks = 1;  // set from the rung's slots later; only the rest is checked
  KVTIER_RETURN_IF_ERROR(Prefixed(prefix, eviction_copy.Validate()));
  AdmissionConfig admission_copy = admission;
  if (admission_copy.window_blocks == 0) admission_copy.window_blocks = 1;  // 0 = the capacity
  return Prefixed(prefix, admission_copy.Validate());
}

RungCounters& RungCounters::operator+=(const RungCounters& other) {
#define KVTIER_RUNG_COUNTER_ADD(name, help) name += other.name;
  KVTIER_RUNG_COUNTERS(KVTIER_RUNG_COUNTER_ADD)
#undef KVTIER_RUNG_COUNTER_ADD
  return *this;
}

struct Ladder::Rung {
  RungOptions options;
  std::unique_ptr<EvictionPolicy> eviction;    // null when absent
  std::unique_ptr<AdmissionPolicy> admission;  // null: admit all without a virtual call
  std::unique_ptr<LeafTracker> leaves;         // leaf-first only
  RungCounters counters;
  uint64_t size = 0;  // resident blocks
  // Only policies with ghost history read ghost keys (S3-FIFO, ARC); the others get 0.
  bool needs_ghost_keys = true;
  bool shedding = false;  // went above the high watermark; sheds down to the low one
};

Ladder::~Ladder() = default;

absl::StatusOr<std::unique_ptr<Ladder>> Ladder::Create(std::vector<RungOptions> rungs,
                                                       size_t expected_ids) {
  if (rungs.empty()) return absl::InvalidArgumentError("ladder: no tiers configured");
  if (rungs.size() > static_cast<size_t>(kMaxTiers)) {
    return absl::InvalidArgumentError(fmt::format(
        "ladder: {} tiers configured; at most {} are supported", rungs.size(), kMaxTiers));
  }
  std::unique_ptr<Ladder> ladder(new Ladder());
  for (size_t i = 0; i < rungs.size(); ++i) {
    auto rung = std::make_unique<Rung>();
    rung->options = std::move(rungs[i]);
    const RungOptions& o = rung->options;
    if (o.present) {
      if (o.capacity_slots == 0) {
        return absl::InvalidArgumentError(
            fmt::format("tier {}: capacity must be at least one block", o.name));
      }
      KVTIER_RETURN_IF_ERROR(o.policy.Validate(o.name));
      EvictionConfig eviction = o.policy.eviction;
      eviction.capacity_blocks = o.capacity_slots;
      KVTIER_ASSIGN_OR_RETURN(rung->eviction, MakeEvictionPolicy(eviction));
      const std::string& name = eviction.policy;
      rung->needs_ghost_keys = name != "lru" && name != "fifo" && name != "sieve";
      if (o.policy.admission.policy != "all") {
        AdmissionConfig admission = o.policy.admission;
        if (admission.window_blocks == 0) admission.window_blocks = o.capacity_slots;
        KVTIER_ASSIGN_OR_RETURN(rung->admission, MakeAdmissionPolicy(admission));
      }
      if (o.policy.leaf_first) {
        rung->leaves = std::make_unique<LeafTracker>();
        ladder->any_leaf_first_ = true;
      }
      ladder->policy_[i] = rung->eviction.get();
    }
    ladder->rungs_.push_back(std::move(rung));
  }
  for (int r = ladder->size() - 1; r >= 0; --r) {
    if (ladder->present(r)) ladder->shed_order_.push_back(r);
  }
  if (ladder->shed_order_.empty()) return absl::InvalidArgumentError("ladder: no tier is present");
  // Read at random by replay: huge pages spare TLB misses; sized up front, no growth on the way.
  ReserveHuge(ladder->mask_, expected_ids);
  ladder->mask_.assign(expected_ids, 0);
  if (ladder->any_leaf_first_) ladder->parent_.assign(expected_ids, kNoBlock);
  return ladder;
}

const RungOptions& Ladder::options(int r) const { return rungs_[static_cast<size_t>(r)]->options; }
bool Ladder::present(int r) const {
  return r >= 0 && r < size() && rungs_[static_cast<size_t>(r)]->options.present;
}
RungCounters& Ladder::counters(int r) { return rungs_[static_cast<size_t>(r)]->counters; }
const RungCounters& Ladder::counters(int r) const {
  return rungs_[static_cast<size_t>(r)]->counters;
}
uint64_t Ladder::Size(int r) const { return rungs_[static_cast<size_t>(r)]->size; }

int Ladder::Below(int r) const {
  for (int b = r + 1; b < size(); ++b) {
    if (present(b)) return b;
  }
  return kNone;
}

int Ladder::Above(int r) const {
  for (int a = r - 1; a >= 0; --a) {
    if (present(a)) return a;
  }
  return kNone;
}

void Ladder::EnsureId(BlockId id) {
  if (id < mask_.size()) return;
  const size_t size = std::max<size_t>(size_t{id} + 1, mask_.size() * 2);
  mask_.resize(size, 0);
  if (any_leaf_first_) parent_.resize(size, kNoBlock);
}

void Ladder::Enter(int r, BlockId id, uint64_t ghost_key, BlockId parent) {
  Rung& rung = *rungs_[static_cast<size_t>(r)];
  EnsureId(id);
  if (any_leaf_first_ && mask_[id] == 0) parent_[id] = parent;
  rung.eviction->Insert(id, rung.needs_ghost_keys ? ghost_key : 0);
  mask_[id] |= Bit(r);
  ++rung.size;
  if (rung.leaves != nullptr) {
    const BlockId p = parent_[id];
    rung.leaves->Add(id, p == kNoBlock ? std::nullopt : std::optional<BlockId>(p));
  }
}

void Ladder::Remove(int r, BlockId id) {
  if ((Mask(id) & Bit(r)) == 0) return;
  Rung& rung = *rungs_[static_cast<size_t>(r)];
  rung.eviction->Erase(id);
  if (rung.leaves != nullptr) rung.leaves->Remove(id);
  mask_[id] &= static_cast<TierMask>(~Bit(r));
  --rung.size;
}

void Ladder::Touch(int r, BlockId id) { (void)TouchIfIn(r, id); }

int Ladder::ReadSource(TierMask copies, int target) {
  if ((copies & Bit(target)) != 0) return target;
  return copies == 0 ? kNone : std::countr_zero(static_cast<unsigned>(copies));
}

int Ladder::NextStep(int source, int target) const {
  if (source < target) return target;
  const int above = Above(source);
  return above == kNone ? target : std::max(above, target);
}

bool Ladder::ShouldShed(int r, uint64_t used) {
  Rung& rung = *rungs_[static_cast<size_t>(r)];
  const double cap = static_cast<double>(rung.options.capacity_slots);
  const double u = static_cast<double>(used);
  if (u > rung.options.policy.high_watermark * cap) rung.shedding = true;
  if (u <= rung.options.policy.low_watermark * cap) rung.shedding = false;
  return rung.shedding;
}

void Ladder::MarkFull(int r) { rungs_[static_cast<size_t>(r)]->shedding = true; }

std::optional<BlockId> Ladder::Choose(int r, absl::FunctionRef<bool(BlockId)> allowed) {
  Rung& rung = *rungs_[static_cast<size_t>(r)];
  std::optional<BlockId> victim;
  if (rung.leaves == nullptr) {
    victim = rung.eviction->Evict(allowed);
  } else {
    const LeafTracker& leaves = *rung.leaves;
    victim = rung.eviction->Evict([&](BlockId id) { return leaves.IsLeaf(id) && allowed(id); });
    // Leaf-first must not wedge the rung: with no evictable leaf (reused ids can leave stale child
    // counts; see leaf_tracker.h) any evictable block goes.
    if (!victim) victim = rung.eviction->Evict(allowed);
  }
  if (!victim) return victim;
  const BlockId v = *victim;
  // The victims of a large rung were used long ago, so their rung bits are cold: start loading
  // the one the policy expects to evict a few evictions from now.
  if (const BlockId next = rung.eviction->UpcomingVictim(); next < mask_.size()) {
    __builtin_prefetch(mask_.data() + next);
  }
  ++rung.counters.evictions;
  --rung.size;
  mask_[v] &= static_cast<TierMask>(~Bit(r));
  if (rung.leaves != nullptr) rung.leaves->Remove(v);
  return victim;
}

bool Ladder::HasCopyBelow(int r, TierMask copies) const { return (copies >> (r + 1)) != 0; }

VictimFate Ladder::FateOf(int r, TierMask copies, uint64_t ghost_key, bool below_admitting) {
  Rung& rung = *rungs_[static_cast<size_t>(r)];
  if (HasCopyBelow(r, copies)) {
    ++rung.counters.clean_evictions;
    return VictimFate::kLeave;
  }
  const int below = Below(r);
  if (below == kNone) return VictimFate::kDrop;
  const Rung& next = *rungs_[static_cast<size_t>(below)];
  if (below_admitting && (next.admission == nullptr || next.admission->Admit(ghost_key))) {
    return VictimFate::kMoveDown;
  }
  ++rung.counters.rejected;
  return VictimFate::kDrop;
}

bool Ladder::AdmitBirth(int r, uint64_t ghost_key) {
  Rung& rung = *rungs_[static_cast<size_t>(r)];
  if (rung.admission == nullptr || rung.admission->Admit(ghost_key)) return true;
  ++rung.counters.births_refused;
  return false;
}

void Ladder::Prefetch(int r, absl::Span<const BlockId> ids) const {
  for (BlockId id : ids) {
    if (id < mask_.size()) __builtin_prefetch(mask_.data() + id);
  }
  if (const EvictionPolicy* p = policy_[static_cast<size_t>(r)]) p->Prefetch(ids);
}

}  // namespace kvtier
