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
  std::unique_ptr<AdmissionPolicy> admission;  // null: admit all (RungState::admission)
  std::unique_ptr<LeafTracker> leaves;         // leaf-first only
  // Only policies with ghost history read ghost keys (S3-FIFO, ARC); the others get 0.
  bool needs_ghost_keys = true;
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
        ladder->state_[i].admission = rung->admission.get();
      }
      if (o.policy.leaf_first) {
        rung->leaves = std::make_unique<LeafTracker>();
        ladder->any_leaf_first_ = true;
      }
      ladder->policy_[i] = rung->eviction.get();
      ladder->state_[i].eviction = rung->eviction.get();
      ladder->state_[i].leaves = rung->leaves.get();
      ladder->state_[i].needs_ghost_keys = rung->needs_ghost_keys;
      const double cap = static_cast<double>(o.capacity_slots);
      ladder->state_[i].high_slots = static_cast<uint64_t>(o.policy.high_watermark * cap);
      ladder->state_[i].capacity_slots = o.capacity_slots;
      ladder->state_[i].low_slots = static_cast<uint64_t>(o.policy.low_watermark * cap);
    }
    ladder->rungs_.push_back(std::move(rung));
  }
  int below = kNone;
  for (int r = ladder->size() - 1; r >= 0; --r) {
    ladder->state_[static_cast<size_t>(r)].below = below;
    if (ladder->present(r)) {
      ladder->shed_order_.push_back(r);
      below = r;
    }
  }
  if (ladder->shed_order_.empty()) return absl::InvalidArgumentError("ladder: no tier is present");
  // Read at random by replay: huge pages spare TLB misses; sized up front, no growth on the way.
  ReserveHuge(ladder->mask_, expected_ids);
  ladder->prefetch_victims_ = expected_ids >= kPrefetchVictimIds;
  ladder->mask_.assign(expected_ids, 0);
  if (ladder->any_leaf_first_) ladder->parent_.assign(expected_ids, kNoBlock);
  return ladder;
}

const RungOptions& Ladder::options(int r) const { return rungs_[static_cast<size_t>(r)]->options; }
bool Ladder::present(int r) const {
  return r >= 0 && r < size() && rungs_[static_cast<size_t>(r)]->options.present;
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

void Ladder::AddLeaf(RungState& s, BlockId id) {
  const BlockId p = parent_[id];
  s.leaves->Add(id, p == kNoBlock ? std::nullopt : std::optional<BlockId>(p));
}

std::optional<BlockId> Ladder::ChooseLeaf(RungState& s, absl::FunctionRef<bool(BlockId)> allowed) {
  const LeafTracker& leaves = *s.leaves;
  std::optional<BlockId> victim =
      s.eviction->Evict([&](BlockId id) { return leaves.IsLeaf(id) && allowed(id); });
  // Leaf-first must not wedge the rung: with no evictable leaf (reused ids can leave stale child
  // counts; see leaf_tracker.h) any evictable block goes.
  if (!victim) victim = s.eviction->Evict(allowed);
  return victim;
}

// The victims of a large rung were used long ago, so their rung bits are cold: start loading the
// one the policy expects to evict a few evictions from now.
void Ladder::PrefetchUpcoming(const RungState& s) const {
  if (const BlockId next = s.eviction->UpcomingVictim(); next < mask_.size()) {
    __builtin_prefetch(mask_.data() + next);
  }
}

void Ladder::Remove(int r, BlockId id) {
  if ((Mask(id) & Bit(r)) == 0) return;
  Rung& rung = *rungs_[static_cast<size_t>(r)];
  rung.eviction->Erase(id);
  if (rung.leaves != nullptr) rung.leaves->Remove(id);
  mask_[id] &= static_cast<TierMask>(~Bit(r));
  --state_[static_cast<size_t>(r)].size;
}

void Ladder::Touch(int r, BlockId id) { (void)TouchIfIn(r, id); }

int Ladder::ReadSource(TierMask copies, int target) {
  if ((copies & Bit(target)) != 0) return target;
  return copies == 0 ? kNone : std::countr_zero(static_cast<unsigned>(copies));
}

int Ladder::NextStep(int source, int target) const {
  if (source < target) return target;
  const int climb_to = options(source).climb_to;
  const int above =
      climb_to >= 0 && climb_to < source && present(climb_to) ? climb_to : Above(source);
  return above == kNone ? target : std::max(above, target);
}

void Ladder::Prefetch(int r, absl::Span<const BlockId> ids) const {
  for (BlockId id : ids) {
    if (id < mask_.size()) __builtin_prefetch(mask_.data() + id);
  }
  if (const EvictionPolicy* p = policy_[static_cast<size_t>(r)]) p->Prefetch(ids);
}

}  // namespace kvtier
