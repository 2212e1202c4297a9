#include "index/leaf_tracker.h"

#include <cassert>

#include "index/intrusive_list.h"

namespace kvtier {

void LeafTracker::EnsureId(BlockId id) {
  GrowToFit(parent_, id, kNotResident);
  GrowToFit(child_count_, id, uint32_t{0});
}

void LeafTracker::Add(BlockId id, std::optional<BlockId> parent) {
  EnsureId(id);
  assert(parent_[id] == kNotResident);
  assert(!parent || (*parent != id && *parent < kNoParent));
  if (parent) {
    EnsureId(*parent);
    ++child_count_[*parent];
    parent_[id] = *parent;
  } else {
    parent_[id] = kNoParent;
  }
  ++size_;
}

void LeafTracker::Remove(BlockId id) {
  assert(Contains(id));
  const uint32_t parent = parent_[id];
  if (parent != kNoParent) {
    assert(child_count_[parent] > 0);
    --child_count_[parent];
  }
  parent_[id] = kNotResident;
  --size_;
}

}  // namespace kvtier
