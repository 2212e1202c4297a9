#include "index/block_index_shard.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <new>
#include <vector>

namespace kvtier::internal {
namespace {

size_t RoundUpToPage(size_t bytes) {
  static const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + kPage - 1) / kPage * kPage;
}

// A 40-byte entry may straddle two cache lines; fetch both.
void PrefetchEntry(const Entry& entry) {
  const char* bytes = reinterpret_cast<const char*>(&entry);
  __builtin_prefetch(bytes);
  __builtin_prefetch(bytes + sizeof(Entry) - 1);
}

}  // namespace

void Entry::Init(const BlockKey& key, const NewBlock& block) {
  lo_.store(key.lo, kStore);
  hi_.store(key.hi, kStore);
  for (std::atomic<uint32_t>& slot : slots_) slot.store(0, kStore);
  set_slot(block.tier, block.slot);
  payload_bytes_.store(block.payload_bytes, kStore);
  parent_.store(block.parent, kStore);
  SetState(0, TierBit(block.tier), true);
}

void Entry::Kill(uint32_t next_free) {
  SetState(0, 0, false);
  parent_.store(next_free, kStore);
}

Reservation::~Reservation() {
  if (base_ != nullptr) munmap(base_, reserved_);
}

bool Reservation::Reserve(size_t bytes) {
  bytes = RoundUpToPage(bytes);
  // PROT_NONE and MAP_NORESERVE: address space only, no commit charge even under strict overcommit.
  void* base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return false;
  // Transparent huge pages where the system allows them: a lookup is two random reads, and with 4
  // KiB pages each would also miss the TLB once the index outgrows it. Best effort; committed
  // memory is still only what Commit made usable.
  (void)madvise(base, bytes, MADV_HUGEPAGE);
  base_ = base;
  reserved_ = bytes;
  return true;
}

bool Reservation::Commit(size_t bytes) {
  if (bytes <= committed_) return true;
  bytes = RoundUpToPage(bytes);
  if (bytes > reserved_) return false;
  if (mprotect(static_cast<char*>(base_) + committed_, bytes - committed_,
               PROT_READ | PROT_WRITE) != 0) {
    return false;
  }
  committed_ = bytes;
  return true;
}

BlockIndexShard::BlockIndexShard() { ABSL_ANNOTATE_RWLOCK_CREATE(&mu_); }
BlockIndexShard::~BlockIndexShard() { ABSL_ANNOTATE_RWLOCK_DESTROY(&mu_); }

bool BlockIndexShard::Init(size_t entries, uint32_t local_limit) {
  WriterLock lock(&mu_);
  local_limit_ = local_limit;
  entries = std::min<size_t>(entries, local_limit);
  // The table may be 80% full before it grows: size >= entries * 5 / 4.
  const size_t max_table = std::bit_ceil(size_t{local_limit} + local_limit / 4 + 1);
  return table_mem_.Reserve(max_table * sizeof(Slot)) &&
         slab_mem_.Reserve(size_t{local_limit} * sizeof(Entry)) &&
         Rehash(std::bit_ceil(std::max(kMinTableSize, entries + entries / 4 + 1)));
}

BlockIndexShard::Inserted BlockIndexShard::Insert(uint32_t tag, const BlockKey& key,
                                                  const NewBlock& block) {
  WriterLock lock(&mu_);
  const uint32_t found = FindLocal(tag, key);
  if (found != kNoLocal) return {found, false};
  SeqWrite write(seq_);
  if ((live_ + 1) * 5 > table_size_ * 4 && !Rehash(table_size_ * 2)) return {};
  const uint32_t local = AllocLocal();
  if (local == kNoLocal) return {};
  At(local).Init(key, block);
  Place(tag, local);
  ++live_;
  return {local, true};
}

void BlockIndexShard::PrefetchSlot(uint32_t tag) const {
  __builtin_prefetch(&table()[tag & mask_.load(kLoad)]);
}

uint32_t BlockIndexShard::ProbeHint(uint32_t tag) const {
  constexpr int kMaxProbes = 16;  // a longer cluster just goes without a hint
  const size_t mask = mask_.load(kLoad);
  size_t pos = tag & mask;
  for (int n = 0; n < kMaxProbes; ++n, pos = (pos + 1) & mask) {
    const uint64_t slot = table()[pos].load(kLoad);
    const uint32_t local = SlotLocal(slot);
    if (local == kNoLocal) return kNoLocal;
    if (SlotTag(slot) == tag) {
      PrefetchEntry(At(local));
      return local;
    }
  }
  return kNoLocal;
}

std::optional<TierMask> BlockIndexShard::TiersOf(uint32_t tag, const BlockKey& key,
                                                 uint32_t hint) const {
  constexpr int kOptimisticTries = 3;
  for (int attempt = 0; attempt < kOptimisticTries; ++attempt) {
    const uint64_t before = seq_.load(kLoad);
    if ((before & 1) != 0) continue;  // a writer is in the middle of a change
    // A live entry holding `key` is the one the table maps `key` to (keys are unique), so a hint
    // that passes this check needs no probe.
    uint32_t local = hint;
    if (local == kNoLocal || !At(local).live() || At(local).key() != key)
      local = ProbeRelaxed(tag, key);
    const TierMask tiers = local == kNoLocal ? 0 : At(local).tiers();
    // Not reordered before the acquire loads above. Unchanged: no writer touched what was read.
    if (seq_.load(std::memory_order_relaxed) != before) continue;
    if (local == kNoLocal) return std::nullopt;
    return tiers;
  }
  ReaderLock lock(&mu_);
  const uint32_t local = FindLocal(tag, key);
  if (local == kNoLocal) return std::nullopt;
  return At(local).tiers();
}

BlockIndexShard::Stats BlockIndexShard::GetStats() const {
  ReaderLock lock(&mu_);
  return Stats{
      .live = live_, .used = used_, .heap_bytes = table_mem_.committed() + slab_mem_.committed()};
}

uint32_t BlockIndexShard::ProbeRelaxed(uint32_t tag, const BlockKey& key) const {
  // Bounded by the table size: a table changing underneath may have no empty slot in view.
  const size_t mask = mask_.load(kLoad);
  size_t pos = tag & mask;
  for (size_t n = 0; n <= mask; ++n, pos = (pos + 1) & mask) {
    const uint64_t slot = table()[pos].load(kLoad);
    const uint32_t local = SlotLocal(slot);
    if (local == kNoLocal) return kNoLocal;
    if (SlotTag(slot) == tag && At(local).key() == key) return local;
  }
  return kNoLocal;
}

size_t BlockIndexShard::FindPos(uint32_t tag, const BlockKey& key) const {
  // Terminates: the table is never more than 80% full.
  const size_t mask = mask_.load(kLoad);
  for (size_t pos = tag & mask;; pos = (pos + 1) & mask) {
    const uint64_t slot = table()[pos].load(kLoad);
    const uint32_t local = SlotLocal(slot);
    if (local == kNoLocal) return kNoPos;
    if (SlotTag(slot) == tag && At(local).key() == key) return pos;
  }
}

void BlockIndexShard::Place(uint32_t tag, uint32_t local) {
  const size_t mask = mask_.load(kLoad);
  size_t pos = tag & mask;
  while (table()[pos].load(kLoad) != 0) pos = (pos + 1) & mask;
  table()[pos].store(PackSlot(tag, local), kStore);
}

bool BlockIndexShard::Rehash(size_t table_size) {
  if (!table_mem_.Commit(table_size * sizeof(Slot))) return false;
  Slot* const table = this->table();
  for (size_t i = table_size_; i < table_size; ++i) new (&table[i]) Slot(0);
  // In place: lock-free readers may see the table half rebuilt, which their seqlock check catches.
  std::vector<uint64_t> old;
  old.reserve(live_);
  for (size_t i = 0; i < table_size_; ++i) {
    const uint64_t slot = table[i].exchange(0, std::memory_order_acq_rel);
    if (slot != 0) old.push_back(slot);
  }
  table_size_ = table_size;
  mask_.store(table_size - 1, kStore);
  for (const uint64_t slot : old) Place(SlotTag(slot), SlotLocal(slot));
  return true;
}

uint32_t BlockIndexShard::AllocLocal() {
  if (free_head_ != kNoLocal) {
    const uint32_t local = free_head_;
    free_head_ = At(local).parent();
    return local;
  }
  if (used_ >= local_limit_) return kNoLocal;
  if (used_ == slab_size_) {
    const uint32_t size = std::min(local_limit_, slab_size_ + kSlabGrowth);
    if (!slab_mem_.Commit(size_t{size} * sizeof(Entry))) return kNoLocal;
    for (uint32_t i = slab_size_; i < size; ++i) new (&At(i)) Entry();
    slab_size_ = size;
  }
  return used_++;
}

void BlockIndexShard::Remove(size_t pos) {
  const size_t mask = mask_.load(kLoad);
  Slot* const table = this->table();
  const uint32_t local = SlotLocal(table[pos].load(kLoad));
  At(local).Kill(free_head_);
  free_head_ = local;
  // Backward shift: walk the cluster after the hole; a slot whose home is cyclically at or before
  // the hole moves into it, and its old position becomes the hole.
  size_t hole = pos;
  for (size_t j = (pos + 1) & mask; table[j].load(kLoad) != 0; j = (j + 1) & mask) {
    const uint64_t slot = table[j].load(kLoad);
    const size_t home = SlotTag(slot) & mask;
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      table[hole].store(slot, kStore);
      hole = j;
    }
  }
  table[hole].store(0, kStore);
  --live_;
}

}  // namespace kvtier::internal
