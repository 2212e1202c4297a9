#include "index/intrusive_list.h"

#include <cassert>

namespace kvtier {

void GhostQueue::PushNewest(uint64_t key) {
  auto [it, inserted] = slot_of_.try_emplace(key, kNoId);
  if (!inserted) {
    order_.MoveToBack(it->second);
    return;
  }
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(keys_.size());
    keys_.push_back(key);
    links_.EnsureId(slot);
  }
  keys_[slot] = key;
  it->second = slot;
  order_.PushBack(slot);
}

bool GhostQueue::Remove(uint64_t key) {
  auto it = slot_of_.find(key);
  if (it == slot_of_.end()) return false;
  uint32_t slot = it->second;
  slot_of_.erase(it);
  FreeSlot(slot);
  return true;
}

void GhostQueue::PopOldest() {
  assert(!order_.empty());
  uint32_t slot = order_.front();
  slot_of_.erase(keys_[slot]);
  FreeSlot(slot);
}

void GhostQueue::FreeSlot(uint32_t slot) {
  order_.Remove(slot);
  free_slots_.push_back(slot);
}

}  // namespace kvtier
