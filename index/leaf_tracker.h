// LeafTracker: which blocks resident in one tier are leaves in that tier, for the leaf-first
// (prefix-aware) eviction mode (DESIGN.md "Prefix awareness").
//
// A child block is useless once its parent is gone, so a tier in leaf-first mode evicts a block
// only when no child of it is resident in the same tier:
//
//   policy->Evict([&](BlockId id) { return tracker.IsLeaf(id) && !leased(id); });
//
// Evicting the deepest blocks first keeps every cached chain a whole prefix. Because leafness is
// per tier, a parent demoted to a lower tier before its children is still findable there.
//
// The tracker stores, per id, the parent link given to Add and the number of resident children, in
// arrays indexed by BlockId (grown on demand, like the policies'). Every operation is O(1).
//
// Preconditions (checked only by assert):
//   - Add takes an id that is not resident; Remove an id that is.
//   - A parent id named by a resident child keeps naming the same block while the child is
//   resident:
//     the caller must not reuse a parent's id for another block before the children that name it
//     have been removed from this tracker (or the new block would inherit their count).
//   - No cycles (a block is not its own ancestor); prefix chains never have them.
//
// Thread-safety: none. A tier serialises calls, as it does for its policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "index/eviction_policy.h"

namespace kvtier {

class LeafTracker {
 public:
  // `id` became resident in this tier. `parent` is its prefix parent, resident here or not (nullopt
  // for the first block of a sequence). A resident parent stops being a leaf.
  void Add(BlockId id, std::optional<BlockId> parent);
  // `id` left this tier (evicted, demoted, erased). Its parent may become a leaf again. Its own
  // resident children stay counted, so if `id` comes back it is again not a leaf.
  void Remove(BlockId id);
  // True when no child of `id` is resident in this tier. For an id never seen, true.
  bool IsLeaf(BlockId id) const { return id >= child_count_.size() || child_count_[id] == 0; }
  // Whether `id` is resident in this tier (added and not removed).
  bool Contains(BlockId id) const { return id < parent_.size() && parent_[id] != kNotResident; }
  // Number of resident ids.
  size_t Size() const { return size_; }

 private:
  // parent_ values: a parent id, kNoParent (resident, no parent) or kNotResident.
  static constexpr uint32_t kNotResident = 0xFFFFFFFFu;
  static constexpr uint32_t kNoParent = 0xFFFFFFFEu;

  void EnsureId(BlockId id);

  std::vector<uint32_t> parent_;       // [id]
  std::vector<uint32_t> child_count_;  // [id] resident children in this tier
  size_t size_ = 0;
};

}  // namespace kvtier
