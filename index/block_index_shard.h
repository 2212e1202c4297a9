// One shard of BlockIndex (index/block_index.h). Internal: included by block_index.cc and by the
// tests that pin the entry size, by nothing else.
//
// A shard is an entry slab plus an open-addressing hash table over it, behind one mutex:
//   - slab: Entry structs in one grow-only reservation, so an entry never moves and its local index
//     (its place in the slab) is stable; BlockIndex turns it into the block's id. Erased entries go
//     on a free list and are reused first, which keeps ids dense.
//   - table: a power-of-two array of 8-byte slots {tag, local}, linear probing, at most 80% full,
//     backward-shift deletion (no tombstones), also grow-only reserved and rehashed in place. The
//     tag is 32 key bits whose low bits are the home position, so rehashing and deletion never read
//     an entry; a tag match is confirmed by comparing the entry's full key.
//
// Writers hold the mutex. The prefix lookup reads without it: because neither array ever moves or
// is unmapped, a reader can always dereference what it finds, and a sequence counter (a seqlock,
// odd while a writer is changing the shard) tells it whether what it read was consistent; if not,
// it retries and finally takes the lock. Every shared field is a std::atomic (acquire loads and
// release stores: plain moves on x86), so lock-free reads are not data races and ThreadSanitizer
// checks the rest.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/base/dynamic_annotations.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "index/block_index.h"

namespace kvtier::internal {

inline constexpr uint32_t kNoLocal = UINT32_MAX;  // "no entry" in a slot, hint or free list
// Orders for every access to shared fields. Acquire loads and release stores are plain moves on
// x86 (and ldar/stlr on ARM); they make the seqlock correct without standalone fences, which
// ThreadSanitizer does not model (see SeqWrite and BlockIndexShard::TiersOf).
inline constexpr auto kLoad = std::memory_order_acquire;
inline constexpr auto kStore = std::memory_order_release;

// A hash-table slot, 8 bytes: tag in the low half, local + 1 in the high half; 0 is empty (so fresh
// zero pages are empty tables).
using Slot = std::atomic<uint64_t>;
static_assert(sizeof(Slot) == 8);
constexpr uint64_t PackSlot(uint32_t tag, uint32_t local) {
  return uint64_t{local + 1} << 32 | tag;
}
constexpr uint32_t SlotTag(uint64_t slot) { return static_cast<uint32_t>(slot); }
constexpr uint32_t SlotLocal(uint64_t slot) { return static_cast<uint32_t>(slot >> 32) - 1; }

// One block, 40 bytes: the fields of BlockInfo less the id (implied by the place in the slab).
// Setters are for writers holding the shard mutex inside a SeqWrite section; getters for anyone.
class Entry {
 public:
  BlockKey key() const { return BlockKey{lo_.load(kLoad), hi_.load(kLoad)}; }
  // 0 for a tier without slots (T3, key-addressed).
  uint32_t slot(Tier tier) const {
    const int t = static_cast<int>(tier);
    return t < kSlotTiers ? slots_[static_cast<size_t>(t)].load(kLoad) : 0;
  }
  uint32_t payload_bytes() const { return payload_bytes_.load(kLoad); }
  BlockId parent() const { return parent_.load(kLoad); }  // while !live: next free local
  uint32_t leases() const { return state_.load(kLoad) & kLeaseMask; }
  TierMask tiers() const { return static_cast<TierMask>(state_.load(kLoad) >> kTierShift & 15); }
  bool live() const { return (state_.load(kLoad) & kLive) != 0; }

  void Init(const BlockKey& key, const NewBlock& block);
  // A no-op for a tier without slots (T3).
  void set_slot(Tier tier, uint32_t slot) {
    const int t = static_cast<int>(tier);
    if (t < kSlotTiers) slots_[static_cast<size_t>(t)].store(slot, kStore);
  }
  void set_tiers(TierMask tiers) { SetState(leases(), tiers, true); }
  void set_leases(uint32_t leases) { SetState(leases, tiers(), true); }
  // Puts the entry on the free list.
  void Kill(uint32_t next_free);

 private:
  static constexpr uint32_t kLeaseMask = BlockIndex::kMaxLeases;  // bits 0-23
  static constexpr int kTierShift = 24;                           // bits 24-27
  static constexpr uint32_t kLive = 1u << 28;
  void SetState(uint32_t leases, TierMask tiers, bool live) {
    state_.store(leases | uint32_t{tiers} << kTierShift | (live ? kLive : 0), kStore);
  }

  std::atomic<uint64_t> lo_{0}, hi_{0};                  // the key
  std::array<std::atomic<uint32_t>, kSlotTiers> slots_;  // slot per slot tier, iff its tiers bit
  std::atomic<uint32_t> payload_bytes_{0};
  std::atomic<uint32_t> parent_{kNoBlock};
  std::atomic<uint32_t> state_{0};  // leases | tiers << 24 | live << 28
};
static_assert(sizeof(Entry) == BlockIndex::kEntryBytes);

// Address space reserved up front (no memory behind it) and committed from its start as it grows;
// nothing in it moves and nothing is given back until destruction.
class Reservation {
 public:
  Reservation() = default;
  ~Reservation();
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;

  bool Reserve(size_t bytes);
  // Makes at least the first `bytes` usable (zero-filled when new); false when out of memory.
  bool Commit(size_t bytes);
  void* data() const { return base_; }
  size_t committed() const { return committed_; }

 private:
  void* base_ = nullptr;
  size_t reserved_ = 0;
  size_t committed_ = 0;
};

// absl::MutexLock and absl::ReaderMutexLock that also tell ThreadSanitizer about the lock. Debian's
// abseil is not built with TSan, so its Mutex is invisible to TSan and every guarded access would
// be reported; these annotations (empty in other builds) restore the happens-before edges the mutex
// provides, as abseil's own would in a TSan build of abseil.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
    ABSL_ANNOTATE_RWLOCK_ACQUIRED(mu_, 1);
  }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() {
    ABSL_ANNOTATE_RWLOCK_RELEASED(mu_, 1);
    mu_->Unlock();
  }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  absl::Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(absl::Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
    ABSL_ANNOTATE_RWLOCK_ACQUIRED(mu_, 0);
  }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() {
    ABSL_ANNOTATE_RWLOCK_RELEASED(mu_, 0);
    mu_->ReaderUnlock();
  }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  absl::Mutex* const mu_;
};

// Aligned so that two shards' mutexes and counters never share a cache line.
class alignas(64) BlockIndexShard {
 public:
  BlockIndexShard();
  ~BlockIndexShard();
  BlockIndexShard(const BlockIndexShard&) = delete;
  BlockIndexShard& operator=(const BlockIndexShard&) = delete;

  // Reserves room for `local_limit` entries (local indexes are < local_limit) and sizes the table
  // for `entries`. Called once, before the shard is shared; false if the memory is not there.
  bool Init(size_t entries, uint32_t local_limit);

  struct Inserted {
    uint32_t local = kNoLocal;  // kNoLocal: the shard is full or out of memory
    bool inserted = false;
  };
  // Inserts `key` as `block` under `tag` unless the key is present.
  Inserted Insert(uint32_t tag, const BlockKey& key, const NewBlock& block)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls f(const Entry&, local) under the lock if `key` is present; returns whether it was.
  template <typename F>
  bool Read(uint32_t tag, const BlockKey& key, F&& f) const ABSL_LOCKS_EXCLUDED(mu_) {
    ReaderLock lock(&mu_);
    const uint32_t local = FindLocal(tag, key);
    if (local == kNoLocal) return false;
    f(At(local), local);
    return true;
  }
  // Same, by local index; false if that entry is not live.
  template <typename F>
  bool ReadLocal(uint32_t local, F&& f) const ABSL_LOCKS_EXCLUDED(mu_) {
    ReaderLock lock(&mu_);
    if (local >= used_ || !At(local).live()) return false;
    f(At(local), local);
    return true;
  }
  // Calls f(Entry&, local) under the exclusive lock if `key` is present; returns whether it was.
  template <typename F>
  bool Modify(uint32_t tag, const BlockKey& key, F&& f) ABSL_LOCKS_EXCLUDED(mu_) {
    WriterLock lock(&mu_);
    const uint32_t local = FindLocal(tag, key);
    if (local == kNoLocal) return false;
    SeqWrite write(seq_);
    f(At(local), local);
    return true;
  }
  // If `key` is present, calls may_erase(const Entry&, local) under the exclusive lock and removes
  // the entry when it returns true. Returns whether the key was present.
  template <typename F>
  bool EraseIf(uint32_t tag, const BlockKey& key, F&& may_erase) ABSL_LOCKS_EXCLUDED(mu_) {
    WriterLock lock(&mu_);
    const size_t pos = FindPos(tag, key);
    if (pos == kNoPos) return false;
    const uint32_t local = SlotLocal(table()[pos].load(kLoad));
    if (may_erase(std::as_const(At(local)), local)) {
      SeqWrite write(seq_);
      Remove(pos);
    }
    return true;
  }

  // Prefix lookup, stage 1 (lock-free): prefetches the table position of `tag`.
  void PrefetchSlot(uint32_t tag) const;
  // Stage 2 (lock-free): the local index of the first slot whose tag matches, or kNoLocal; only a
  // hint, unchecked against the key. Prefetches that entry.
  uint32_t ProbeHint(uint32_t tag) const;
  // Stage 3: the tiers of `key` if present, nullopt if absent. Lock-free unless writers keep
  // changing this shard, then under the lock. `hint` saves the probe when it names the entry.
  std::optional<TierMask> TiersOf(uint32_t tag, const BlockKey& key, uint32_t hint) const
      ABSL_LOCKS_EXCLUDED(mu_);

  struct Stats {
    size_t live = 0;        // entries in the table
    uint32_t used = 0;      // local indexes handed out so far (live + free list)
    size_t heap_bytes = 0;  // committed table and slab bytes
  };
  Stats GetStats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static constexpr size_t kNoPos = SIZE_MAX;
  static constexpr size_t kMinTableSize = 16;
  static constexpr uint32_t kSlabGrowth = 512;  // entries committed at a time (20 KiB)

  // Marks a writer's change of the shard for lock-free readers: odd while it lasts. The opening
  // store is ordered before the change's data stores because those are release stores; a reader
  // that sees any of them (acquire loads) then sees the odd count when it checks again.
  class SeqWrite {
   public:
    explicit SeqWrite(std::atomic<uint64_t>& seq) : seq_(seq) {
      seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    ~SeqWrite() { seq_.store(seq_.load(std::memory_order_relaxed) + 1, kStore); }
    SeqWrite(const SeqWrite&) = delete;
    SeqWrite& operator=(const SeqWrite&) = delete;

   private:
    std::atomic<uint64_t>& seq_;
  };

  Slot* table() const { return static_cast<Slot*>(table_mem_.data()); }
  Entry& At(uint32_t local) const { return static_cast<Entry*>(slab_mem_.data())[local]; }
  // Lock-free probe: the local index holding `key` in the table as it looks now, or kNoLocal.
  // Bounded even when writers change the table underneath.
  uint32_t ProbeRelaxed(uint32_t tag, const BlockKey& key) const;
  // Table position holding `key`, or kNoPos.
  size_t FindPos(uint32_t tag, const BlockKey& key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  uint32_t FindLocal(uint32_t tag, const BlockKey& key) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    const size_t pos = FindPos(tag, key);
    return pos == kNoPos ? kNoLocal : SlotLocal(table()[pos].load(kLoad));
  }
  // Places {tag, local} at the first empty position from its home. Precondition: one is empty.
  void Place(uint32_t tag, uint32_t local) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Rehash(size_t table_size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A local index for a new entry (free list first), or kNoLocal when full or out of memory.
  uint32_t AllocLocal() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Empties table position `pos`, backward-shifting its cluster, and frees its entry.
  void Remove(size_t pos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::atomic<uint64_t> seq_{
      0};                     // seqlock for lock-free readers; odd while a writer changes things
  uint32_t local_limit_ = 0;  // set by Init
  // Table: [mask_ + 1] slots committed at the start of table_mem_. mask_ is atomic for lock-free
  // readers; it only grows, so any mask a reader sees stays inside committed memory.
  Reservation table_mem_;
  std::atomic<size_t> mask_{0};
  size_t table_size_ ABSL_GUARDED_BY(mu_) = 0;  // mask_ + 1 once initialised
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;
  // Slab: [used_] entries at the start of slab_mem_, committed kSlabGrowth at a time.
  Reservation slab_mem_;
  uint32_t slab_size_ ABSL_GUARDED_BY(mu_) = 0;         // entries committed and constructed
  uint32_t used_ ABSL_GUARDED_BY(mu_) = 0;              // local indexes ever handed out
  uint32_t free_head_ ABSL_GUARDED_BY(mu_) = kNoLocal;  // free list through Entry::parent
};

}  // namespace kvtier::internal
