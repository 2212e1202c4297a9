// One shard of BlockIndex (index/block_index.h). Internal: included by block_index.cc and by the
// tests that pin the entry size, by nothing else.
//
// A shard is an entry slab plus an open-addressing hash table over it, behind one mutex:
//   - slab: chunks of kChunkEntries Entry structs that never move, so an entry's local index (its
//     place in the slab) is stable and BlockIndex turns it into the block's id. Erased entries go
//     on a free list and are reused first, which keeps ids dense.
//   - table: a power-of-two array of 8-byte Slots {tag, local}, linear probing, at most 80% full,
//     backward-shift deletion (no tombstones). The tag is 32 key bits whose low bits are the home
//     position, so rehashing and deletion never read an entry; a tag match is confirmed by
//     comparing the entry's full key.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/dynamic_annotations.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "index/block_index.h"

namespace kvtier::internal {

inline constexpr uint32_t kNoLocal = UINT32_MAX;  // "no entry" in a slot, hint or free list

// One hash-table position. 8 bytes.
struct Slot {
  uint32_t tag = 0;           // key bits [shard_bits, shard_bits + 32); tag & mask = home position
  uint32_t local = kNoLocal;  // index of the entry in the slab; kNoLocal = empty position
};
static_assert(sizeof(Slot) == 8);

// One block. 40 bytes; the fields of BlockInfo less the id (implied by the place in the slab).
struct Entry {
  BlockKey key;                           // 16 B
  std::array<uint32_t, kNumTiers> slots;  // 12 B: slot in tier t, meaningful iff tiers bit t
  uint32_t payload_bytes;                 // 4 B
  BlockId parent;                         // 4 B; while !live: the next free local index
  uint32_t leases : 24;                   // up to BlockIndex::kMaxLeases
  uint32_t tiers : 3;                     // TierMask
  uint32_t live : 1;                      // 0: on the free list
};
static_assert(sizeof(Entry) == BlockIndex::kEntryBytes);

inline constexpr uint32_t kChunkBits = 9;
inline constexpr uint32_t kChunkEntries = 1u << kChunkBits;  // entries per slab chunk (20 KiB)

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

// Aligned so that two shards' mutexes never share a cache line.
class alignas(64) BlockIndexShard {
 public:
  BlockIndexShard() { ABSL_ANNOTATE_RWLOCK_CREATE(&mu_); }
  ~BlockIndexShard() { ABSL_ANNOTATE_RWLOCK_DESTROY(&mu_); }
  BlockIndexShard(const BlockIndexShard&) = delete;
  BlockIndexShard& operator=(const BlockIndexShard&) = delete;

  // Sizes the table for `entries` and caps local indexes below `local_limit`. Called once, before
  // the shard is shared.
  void Init(size_t entries, uint32_t local_limit);

  struct Inserted {
    uint32_t local = kNoLocal;  // kNoLocal: the shard is full (local_limit reached)
    bool inserted = false;
  };
  // Inserts `init` (its key field set, live set) under `tag` unless its key is present.
  Inserted Insert(uint32_t tag, const Entry& init) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls f(const Entry&, local) under a shared lock if `key` is present; returns whether it was.
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
    if (local >= used_ || !At(local).live) return false;
    f(At(local), local);
    return true;
  }
  // Calls f(Entry&, local) under the exclusive lock if `key` is present; returns whether it was.
  template <typename F>
  bool Modify(uint32_t tag, const BlockKey& key, F&& f) ABSL_LOCKS_EXCLUDED(mu_) {
    WriterLock lock(&mu_);
    const uint32_t local = FindLocal(tag, key);
    if (local == kNoLocal) return false;
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
    const uint32_t local = table_[pos].local;
    if (may_erase(std::as_const(At(local)), local)) Remove(pos);
    return true;
  }

  // Prefix lookup, stage 1: prefetches the table position of `tag`. Lock-free; may prefetch a stale
  // address while the table grows, which is harmless.
  void PrefetchSlot(uint32_t tag) const;
  // Stage 2: the local index of the first slot whose tag matches (a hint, not checked against the
  // key), or kNoLocal; prefetches that entry.
  uint32_t ProbeHint(uint32_t tag) const ABSL_LOCKS_EXCLUDED(mu_);
  // Stage 3: the tiers of `key` if present, trying the hint before probing; nullopt if absent.
  std::optional<TierMask> TiersOf(uint32_t tag, const BlockKey& key, uint32_t hint) const
      ABSL_LOCKS_EXCLUDED(mu_);

  struct Stats {
    size_t live = 0;        // entries in the table
    uint32_t used = 0;      // local indexes handed out so far (live + free list)
    size_t heap_bytes = 0;  // table + slab + chunk directory
  };
  Stats GetStats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static constexpr size_t kNoPos = SIZE_MAX;
  static constexpr size_t kMinTableSize = 16;

  Entry& At(uint32_t local) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return chunks_[local >> kChunkBits][local & (kChunkEntries - 1)];
  }
  // Table position holding `key`, or kNoPos.
  size_t FindPos(uint32_t tag, const BlockKey& key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  uint32_t FindLocal(uint32_t tag, const BlockKey& key) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    const size_t pos = FindPos(tag, key);
    return pos == kNoPos ? kNoLocal : table_[pos].local;
  }
  // Places {tag, local} at the first empty position from its home. Precondition: one is empty.
  void Place(uint32_t tag, uint32_t local) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Rehash(size_t table_size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A local index for a new entry (free list first), or kNoLocal at local_limit_.
  uint32_t AllocLocal() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Empties table position `pos`, backward-shifting its cluster, and frees its entry.
  void Remove(size_t pos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  uint32_t local_limit_ = 0;  // set by Init; local indexes are < local_limit_
  // Hash table, [power of two] slots; mask_ = size - 1.
  std::vector<Slot> table_ ABSL_GUARDED_BY(mu_);
  size_t mask_ ABSL_GUARDED_BY(mu_) = 0;
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;
  // Entry slab: [used_ rounded up to kChunkEntries] entries in chunks of kChunkEntries.
  std::vector<std::unique_ptr<Entry[]>> chunks_ ABSL_GUARDED_BY(mu_);
  uint32_t used_ ABSL_GUARDED_BY(mu_) = 0;              // local indexes ever handed out
  uint32_t free_head_ ABSL_GUARDED_BY(mu_) = kNoLocal;  // free list through Entry::parent
  // Copies of table_.data() and mask_, published for PrefetchSlot's lock-free hint only.
  std::atomic<const Slot*> hint_table_{nullptr};
  std::atomic<size_t> hint_mask_{0};
};

}  // namespace kvtier::internal
