// SIEVE (Zhang et al., "SIEVE is Simpler than LRU", NSDI'24).
//
// One FIFO (front = oldest) and a hand. A hit only sets the block's visited bit, so hits cost one
// byte store. Eviction moves the hand from older to newer, wrapping from the newest back to the
// oldest: a visited block has its bit cleared and stays in place; the first unvisited block is the
// victim, and the hand rests on the block after it. New blocks go to the newest end, so the hand
// meets them last.
//
// The paper makes room before a new block enters; callers of this interface insert first and then
// evict while over capacity. So that the victims are the paper's, the latest Insert stays pending
// (counted by Size(), not yet in the FIFO) until the next call other than Evict or the next Evict
// that finds a victim among the older blocks; only when none of those may go is the pending block
// itself the victim.
//
// With can_evict: a rejected block is passed over with its visited bit untouched. After one lap the
// hand has cleared every accepted block's bit, so the second lap finds a victim; if the first lap
// accepted nothing, Evict returns nullopt and the hand is left where it was.
#include <cassert>
#include <utility>

#include "index/intrusive_list.h"
#include "index/policies_internal.h"

namespace kvtier {
namespace {

class SievePolicy final : public EvictionPolicy {
 public:
  SievePolicy() : order_(&links_) {}

  void Insert(BlockId id, uint64_t /*ghost_key*/) override {
    Commit();
    links_.EnsureId(id);
    GrowToFit(visited_, id, uint8_t{0});
    assert(!order_.Contains(id));
    visited_[id] = 0;
    pending_ = id;
  }

  void Touch(BlockId id) override {
    Commit();
    assert(order_.Contains(id));
    visited_[id] = 1;
  }

  void Erase(BlockId id) override {
    Commit();
    assert(order_.Contains(id));
    if (hand_ == id) hand_ = order_.Next(id);
    order_.Remove(id);
  }

  std::optional<BlockId> Evict(absl::FunctionRef<bool(BlockId)> can_evict) override;

  size_t Size() const override { return order_.size() + (pending_ != kNoId ? 1 : 0); }
  std::string_view Name() const override { return "sieve"; }

 private:
  // Links the pending block in as the newest.
  void Commit() {
    if (pending_ == kNoId) return;
    order_.PushBack(pending_);
    pending_ = kNoId;
  }
  std::optional<BlockId> EvictCommitted(absl::FunctionRef<bool(BlockId)> can_evict);

  // The block after `id` in the hand's direction, wrapping around.
  uint32_t Advance(uint32_t id) const {
    uint32_t next = order_.Next(id);
    return next != kNoId ? next : order_.front();
  }

  ListLinks links_;
  IntrusiveList order_;           // oldest insertion first
  std::vector<uint8_t> visited_;  // [id]: referenced since the hand last passed
  uint32_t hand_ = kNoId;         // kNoId: start from the oldest
  uint32_t pending_ = kNoId;      // the latest Insert, not yet in order_
};

std::optional<BlockId> SievePolicy::Evict(absl::FunctionRef<bool(BlockId)> can_evict) {
  if (auto victim = EvictCommitted(can_evict)) {
    Commit();
    return victim;
  }
  if (pending_ == kNoId || !can_evict(pending_)) return std::nullopt;
  return std::exchange(pending_, kNoId);
}

std::optional<BlockId> SievePolicy::EvictCommitted(absl::FunctionRef<bool(BlockId)> can_evict) {
  const size_t n = order_.size();
  uint32_t id = hand_ != kNoId ? hand_ : order_.front();
  bool any_accepted = false;
  for (size_t step = 0; id != kNoId; ++step, id = Advance(id)) {
    if (step == n && !any_accepted) return std::nullopt;  // one full lap, all rejected
    if (!can_evict(id)) continue;
    any_accepted = true;
    if (visited_[id]) {
      visited_[id] = 0;
      continue;
    }
    hand_ = order_.Next(id);
    order_.Remove(id);
    return id;
  }
  return std::nullopt;  // empty
}

}  // namespace

std::unique_ptr<EvictionPolicy> NewSievePolicy() { return std::make_unique<SievePolicy>(); }

}  // namespace kvtier
