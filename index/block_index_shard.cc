#include "index/block_index_shard.h"

#include <algorithm>
#include <bit>

namespace kvtier::internal {

void BlockIndexShard::Init(size_t entries, uint32_t local_limit) {
  WriterLock lock(&mu_);
  local_limit_ = local_limit;
  // The table may be 80% full before it grows: size >= entries * 5 / 4.
  Rehash(std::bit_ceil(std::max(kMinTableSize, entries + entries / 4 + 1)));
}

BlockIndexShard::Inserted BlockIndexShard::Insert(uint32_t tag, const Entry& init) {
  WriterLock lock(&mu_);
  const uint32_t found = FindLocal(tag, init.key);
  if (found != kNoLocal) return {found, false};
  const uint32_t local = AllocLocal();
  if (local == kNoLocal) return {};
  At(local) = init;
  if ((live_ + 1) * 5 > table_.size() * 4) Rehash(table_.size() * 2);
  Place(tag, local);
  ++live_;
  return {local, true};
}

void BlockIndexShard::PrefetchSlot(uint32_t tag) const {
  const Slot* table = hint_table_.load(std::memory_order_relaxed);
  const size_t mask = hint_mask_.load(std::memory_order_relaxed);
  // A prefetch never faults, so a stale pointer or mismatched mask costs at most a wasted fetch.
  if (table != nullptr) __builtin_prefetch(table + (tag & mask));
}

uint32_t BlockIndexShard::ProbeHint(uint32_t tag) const {
  ReaderLock lock(&mu_);
  for (size_t pos = tag & mask_;; pos = (pos + 1) & mask_) {
    const Slot& slot = table_[pos];
    if (slot.local == kNoLocal) return kNoLocal;
    if (slot.tag == tag) {
      // A 40-byte entry may straddle two cache lines; fetch both.
      const char* entry = reinterpret_cast<const char*>(&At(slot.local));
      __builtin_prefetch(entry);
      __builtin_prefetch(entry + sizeof(Entry) - 1);
      return slot.local;
    }
  }
}

std::optional<TierMask> BlockIndexShard::TiersOf(uint32_t tag, const BlockKey& key,
                                                 uint32_t hint) const {
  ReaderLock lock(&mu_);
  // A live entry holding `key` is the one the table maps `key` to (keys are unique), so a hint that
  // passes this check needs no probe. A stale hint (the entry was erased or reused) falls through.
  uint32_t local = hint;
  if (hint >= used_ || !At(hint).live || At(hint).key != key) local = FindLocal(tag, key);
  if (local == kNoLocal) return std::nullopt;
  return static_cast<TierMask>(At(local).tiers);
}

BlockIndexShard::Stats BlockIndexShard::GetStats() const {
  ReaderLock lock(&mu_);
  Stats stats;
  stats.live = live_;
  stats.used = used_;
  stats.heap_bytes = table_.capacity() * sizeof(Slot) +
                     chunks_.size() * kChunkEntries * sizeof(Entry) +
                     chunks_.capacity() * sizeof(chunks_[0]);
  return stats;
}

size_t BlockIndexShard::FindPos(uint32_t tag, const BlockKey& key) const {
  // Terminates: the table is never more than 80% full.
  for (size_t pos = tag & mask_;; pos = (pos + 1) & mask_) {
    const Slot& slot = table_[pos];
    if (slot.local == kNoLocal) return kNoPos;
    if (slot.tag == tag && At(slot.local).key == key) return pos;
  }
}

void BlockIndexShard::Place(uint32_t tag, uint32_t local) {
  size_t pos = tag & mask_;
  while (table_[pos].local != kNoLocal) pos = (pos + 1) & mask_;
  table_[pos] = Slot{tag, local};
}

void BlockIndexShard::Rehash(size_t table_size) {
  std::vector<Slot> old = std::move(table_);
  table_.assign(table_size, Slot{});
  mask_ = table_size - 1;
  for (const Slot& slot : old) {
    if (slot.local != kNoLocal) Place(slot.tag, slot.local);
  }
  hint_mask_.store(mask_, std::memory_order_relaxed);
  hint_table_.store(table_.data(), std::memory_order_relaxed);
}

uint32_t BlockIndexShard::AllocLocal() {
  if (free_head_ != kNoLocal) {
    const uint32_t local = free_head_;
    free_head_ = At(local).parent;
    return local;
  }
  if (used_ >= local_limit_) return kNoLocal;
  if (used_ % kChunkEntries == 0) chunks_.push_back(std::make_unique<Entry[]>(kChunkEntries));
  return used_++;
}

void BlockIndexShard::Remove(size_t pos) {
  const uint32_t local = table_[pos].local;
  Entry& entry = At(local);
  entry.live = 0;
  entry.tiers = 0;
  entry.leases = 0;
  entry.parent = free_head_;
  free_head_ = local;
  // Backward shift: walk the cluster after the hole; a slot whose home is cyclically at or before
  // the hole moves into it, and its old position becomes the hole.
  size_t hole = pos;
  for (size_t j = (pos + 1) & mask_; table_[j].local != kNoLocal; j = (j + 1) & mask_) {
    const size_t home = table_[j].tag & mask_;
    if (((j - home) & mask_) >= ((j - hole) & mask_)) {
      table_[hole] = table_[j];
      hole = j;
    }
  }
  table_[hole] = Slot{};
  --live_;
}

}  // namespace kvtier::internal
