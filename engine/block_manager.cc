#include "engine/block_manager.h"

#include <algorithm>

namespace kvtier::engine {

BlockManager::BlockManager(int32_t num_slots, int64_t block_tokens, const BlockKey& root,
                           bool prefix_caching)
    : block_tokens_(block_tokens), root_(root), prefix_caching_(prefix_caching), slots_(num_slots) {
  free_.reserve(num_slots);
  for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);  // slot 0 first
}

int32_t BlockManager::Find(const BlockKey& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? -1 : it->second;
}

int64_t BlockManager::CachedPrefixBlocks(Sequence& seq) {
  if (!prefix_caching_) return 0;
  const int64_t most = (seq.num_tokens() - 1) / block_tokens_;
  int64_t found = 0;
  while (found < most && Find(seq.BlockKeyAt(found, block_tokens_, root_)) >= 0) ++found;
  return found;
}

int64_t BlockManager::SlotsToAdmit(Sequence& seq, int64_t cached, int64_t end) {
  int64_t idle_hits = 0;  // cached blocks that leave the free pool when attached
  for (int64_t i = 0; i < cached; ++i) {
    idle_hits += slots_[Find(seq.BlockKeyAt(i, block_tokens_, root_))].refs == 0;
  }
  return idle_hits + std::max<int64_t>(0, BlocksFor(end) - cached);
}

int64_t BlockManager::SlotsToGrow(const Sequence& seq, int64_t end) const {
  return std::max<int64_t>(0, BlocksFor(end) - static_cast<int64_t>(seq.block_table().size()));
}

void BlockManager::Hold(int32_t slot) {
  Slot& s = slots_[slot];
  if (s.refs++ == 0) lru_.erase(s.lru);  // only keyed slots are found with refs == 0
}

int32_t BlockManager::TakeFree() {
  int32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = lru_.front();
    lru_.pop_front();
    by_key_.erase(slots_[slot].key);
    slots_[slot].keyed = false;
  }
  slots_[slot].refs = 1;
  return slot;
}

void BlockManager::Admit(Sequence& seq, int64_t cached, int64_t end) {
  std::vector<int32_t>& table = seq.mutable_block_table();
  for (int64_t i = 0; i < cached; ++i) {
    const int32_t slot = Find(seq.BlockKeyAt(i, block_tokens_, root_));
    Hold(slot);
    table.push_back(slot);
  }
  seq.AddCachedTokens(cached * block_tokens_);
  Grow(seq, end);
}

void BlockManager::Grow(Sequence& seq, int64_t end) {
  std::vector<int32_t>& table = seq.mutable_block_table();
  while (static_cast<int64_t>(table.size()) < BlocksFor(end)) table.push_back(TakeFree());
}

void BlockManager::Commit(Sequence& seq, int64_t from) {
  if (!prefix_caching_) return;
  const int64_t full = seq.num_computed_tokens() / block_tokens_;
  for (int64_t i = from / block_tokens_; i < full; ++i) {
    const BlockKey& key = seq.BlockKeyAt(i, block_tokens_, root_);
    Slot& s = slots_[seq.block_table()[i]];
    if (s.keyed || Find(key) >= 0) continue;  // computed twice: the first copy is the cached one
    s.keyed = true;
    s.key = key;
    by_key_[key] = seq.block_table()[i];
  }
}

void BlockManager::Release(Sequence& seq) {
  std::vector<int32_t>& table = seq.mutable_block_table();
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    Slot& s = slots_[*it];
    if (--s.refs > 0) continue;
    if (s.keyed) {
      s.lru = lru_.insert(lru_.end(), *it);
    } else {
      free_.push_back(*it);
    }
  }
  table.clear();
  seq.ResetComputed();
}

}  // namespace kvtier::engine
