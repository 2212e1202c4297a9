// Internal to index/: the building blocks the eviction policies share.
//
// ListLinks + IntrusiveList: doubly linked lists threaded through arrays indexed by a dense id, so
// a policy's per-block order costs 8 bytes per id and no allocation per operation (the arrays grow
// geometrically on demand and are never shrunk). Several lists may share one ListLinks (S3-FIFO's
// small and main queues, ARC's T1 and T2) as long as an id is in at most one of them at a time.
//
// GhostQueue: a FIFO of 64-bit ghost keys (eviction_policy.h) with O(1) membership, removal by key
// and drop-oldest, for S3-FIFO's ghost queue and ARC's B1/B2. Its slots are recycled, so once it
// has reached its largest size it allocates nothing either.
//
// Direction: "front" is the oldest end (the next victim of a FIFO, the LRU end), "back" the newest;
// Next() walks from older to newer.
//
// Thread-safety: none; each object belongs to one policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/huge_pages.h"

namespace kvtier {

// "No id": the end of a list, an unlinked id.
inline constexpr uint32_t kNoId = 0xFFFFFFFFu;

// Grows `v` so that `v[id]` is valid, filling new entries with `fill`. Geometric, so a run of
// increasing ids costs amortised O(1).
template <typename T>
inline void GrowToFit(std::vector<T>& v, uint32_t id, const T& fill) {
  if (id < v.size()) return;
  size_t n = v.size() < 16 ? 16 : v.size() * 2;
  if (n <= id) n = size_t{id} + 1;
  ReserveHuge(v, n);  // per-id arrays are read at random: huge pages spare TLB misses
  v.resize(n, fill);
}

// prev/next for every id; shared by the lists that thread through it.
class ListLinks {
 public:
  // Makes `id` addressable (unlinked if new).
  void EnsureId(uint32_t id) { GrowToFit(links_, id, Link{}); }

 private:
  friend class IntrusiveList;
  struct Link {
    uint32_t prev = kNoId;  // towards the front (older)
    uint32_t next = kNoId;  // towards the back (newer)
  };
  std::vector<Link> links_;  // [id]
};

// One list over a ListLinks that outlives it. Preconditions (checked only by assert): PushBack
// takes an id that is in no list sharing the links and was made addressable by EnsureId;
// Remove/MoveToBack take an id in this list.
class IntrusiveList {
 public:
  explicit IntrusiveList(ListLinks* links) : links_(&links->links_) {}

  uint32_t front() const { return front_; }
  uint32_t back() const { return back_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The neighbour of a listed id towards the back / front; kNoId at the end.
  uint32_t Next(uint32_t id) const { return (*links_)[id].next; }
  uint32_t Prev(uint32_t id) const { return (*links_)[id].prev; }

  // Whether the links of `a` and `b` lie in the same 64-byte cache line (loading one loads both).
  bool SameCacheLine(uint32_t a, uint32_t b) const {
    return reinterpret_cast<uintptr_t>(links_->data() + a) / 64 ==
           reinterpret_cast<uintptr_t>(links_->data() + b) / 64;
  }
  // Whether `id` has links (EnsureId was called for it or a larger id).
  bool Addressable(uint32_t id) const { return id < links_->size(); }
  // Starts loading the links of `id` into the cache; a hint with no observable effect.
  // Precondition: `id` was made addressable (EnsureId). A read prefetch: prefetchw needs -mprfchw,
  // which the portable build lacks. Unconditional on purpose: GCC 12 drops a __builtin_prefetch
  // guarded by a bounds check inside a loop like the LRU's lookahead.
  void Prefetch(uint32_t id) const { __builtin_prefetch(links_->data() + id); }

  // Whether `id` is linked into this list, assuming it is in no other list on the same links.
  bool Contains(uint32_t id) const {
    if (id >= links_->size()) return false;
    const auto& l = (*links_)[id];
    return l.prev != kNoId || l.next != kNoId || front_ == id;
  }

  void PushBack(uint32_t id) {
    auto& l = (*links_)[id];
    l.prev = back_;
    l.next = kNoId;
    if (back_ != kNoId) {
      (*links_)[back_].next = id;
    } else {
      front_ = id;
    }
    back_ = id;
    ++size_;
  }

  void Remove(uint32_t id) {
    auto& l = (*links_)[id];
    if (l.prev != kNoId) {
      (*links_)[l.prev].next = l.next;
    } else {
      front_ = l.next;
    }
    if (l.next != kNoId) {
      (*links_)[l.next].prev = l.prev;
    } else {
      back_ = l.prev;
    }
    l.prev = l.next = kNoId;
    --size_;
  }

  void MoveToBack(uint32_t id) {
    if (back_ == id) return;
    Remove(id);
    PushBack(id);
  }

 private:
  std::vector<ListLinks::Link>* links_;
  uint32_t front_ = kNoId;
  uint32_t back_ = kNoId;
  size_t size_ = 0;
};

// A FIFO of ghost keys. Pushing a key already present moves it to the newest end (a key is never
// listed twice). The owner bounds the size by calling PopOldest.
class GhostQueue {
 public:
  GhostQueue() : order_(&links_) {}
  GhostQueue(const GhostQueue&) = delete;
  GhostQueue& operator=(const GhostQueue&) = delete;

  size_t size() const { return order_.size(); }
  bool empty() const { return order_.empty(); }
  bool Contains(uint64_t key) const { return slot_of_.contains(key); }

  // Adds `key` as the newest ghost.
  void PushNewest(uint64_t key);
  // Removes `key`; returns whether it was there.
  bool Remove(uint64_t key);
  // Drops the oldest ghost. Precondition: !empty().
  void PopOldest();

 private:
  void FreeSlot(uint32_t slot);

  absl::flat_hash_map<uint64_t, uint32_t> slot_of_;  // key -> slot
  std::vector<uint64_t> keys_;                       // [slot] -> key
  std::vector<uint32_t> free_slots_;                 // slots not in order_
  ListLinks links_;                                  // over slots
  IntrusiveList order_;                              // slots, oldest first
};

}  // namespace kvtier
