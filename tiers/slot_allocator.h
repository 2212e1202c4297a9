// SlotAllocator: the free set of a tier's fixed-size slots. O(1) Allocate and Free from a free
// stack, with a per-slot "allocated" flag so a double free (or a free of a slot never handed out)
// is caught, refused and counted instead of corrupting the stack: two owners of one slot would
// silently overwrite each other's blocks, the one bug a cache must never have.
//
// Thread-safety: every method may be called from any thread. One mutex guards the stack; a
// critical section is a handful of instructions, far below the cost of the copy that follows an
// Allocate, so a lock-free stack would buy nothing measurable here.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/status.h"
#include "tiers/storage_tier.h"

namespace kvtier {

class SlotAllocator {
 public:
  // All `capacity` slots start free. Precondition: capacity < kNoSlot.
  explicit SlotAllocator(uint32_t capacity);
  // Only slots [0, ready) start free; the rest join the free set through Grow (a tier whose memory
  // becomes usable piece by piece: T1 while it is faulted in). Precondition: ready <= capacity.
  SlotAllocator(uint32_t capacity, uint32_t ready);

  SlotAllocator(const SlotAllocator&) = delete;
  SlotAllocator& operator=(const SlotAllocator&) = delete;

  // A free slot in [0, capacity), or ResourceExhausted when every slot is taken (a normal outcome:
  // the caller evicts and retries). Slots freed last are handed out first (warm in cache).
  absl::StatusOr<SlotId> Allocate();

  // Returns `slot` to the free set. OutOfRange for a slot >= capacity; FailedPrecondition, counted
  // in double_frees(), for a slot that is not allocated. The free set is unchanged on error.
  absl::Status Free(SlotId slot);

  // Whether `slot` is currently allocated (false when out of range). A snapshot.
  bool IsAllocated(SlotId slot) const;

  // Slots [ready(), new_ready) become free, the lowest handed out first; a new_ready not above
  // ready() changes nothing and one above capacity() is clamped to it.
  void Grow(uint32_t new_ready);

  uint32_t capacity() const { return capacity_; }
  // Slots that may be handed out at all: capacity() once grown in full.
  uint32_t ready() const { return ready_.load(std::memory_order_acquire); }
  uint32_t used() const;
  // Frees refused because the slot was not allocated, since construction.
  uint64_t double_frees() const;
  // Allocations refused because the tier was full, since construction.
  uint64_t exhausted() const;

 private:
  const uint32_t capacity_;
  std::atomic<uint32_t> ready_;  // written under mu_; read without it for statistics
  mutable std::mutex mu_;
  std::vector<SlotId> free_stack_ ABSL_GUARDED_BY(mu_);  // top = back()
  std::vector<bool> allocated_ ABSL_GUARDED_BY(mu_);     // indexed by SlotId
  uint64_t double_frees_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t exhausted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvtier
