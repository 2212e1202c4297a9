#include "tiers/slot_allocator.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvtier {

SlotAllocator::SlotAllocator(uint32_t capacity) : SlotAllocator(capacity, capacity) {}

SlotAllocator::SlotAllocator(uint32_t capacity, uint32_t ready)
    : capacity_(capacity), ready_(0), allocated_(capacity, false) {
  free_stack_.reserve(capacity);
  Grow(ready);
}

void SlotAllocator::Grow(uint32_t new_ready) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t old = ready_.load(std::memory_order_relaxed);
  new_ready = std::min(new_ready, capacity_);
  if (new_ready <= old) return;
  // Pushed above the slots freed so far, in reverse, so the next Allocate calls hand out old,
  // old + 1, ...: consecutive slots are adjacent in memory, which keeps a fresh tier's early blocks
  // on few pages.
  for (uint32_t i = new_ready; i > old; --i) free_stack_.push_back(i - 1);
  ready_.store(new_ready, std::memory_order_release);
}

absl::StatusOr<SlotId> SlotAllocator::Allocate() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_stack_.empty()) {
    ++exhausted_;
    return absl::ResourceExhaustedError(fmt::format("all {} slots are allocated", capacity_));
  }
  const SlotId slot = free_stack_.back();
  free_stack_.pop_back();
  allocated_[slot] = true;
  return slot;
}

absl::Status SlotAllocator::Free(SlotId slot) {
  if (slot >= capacity_) {
    return absl::OutOfRangeError(
        fmt::format("free of slot {}: out of range (capacity {})", slot, capacity_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!allocated_[slot]) {
    ++double_frees_;
    return absl::FailedPreconditionError(
        fmt::format("free of slot {}: not allocated (double free?)", slot));
  }
  allocated_[slot] = false;
  free_stack_.push_back(slot);
  return absl::OkStatus();
}

bool SlotAllocator::IsAllocated(SlotId slot) const {
  if (slot >= capacity_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_[slot];
}

uint32_t SlotAllocator::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.load(std::memory_order_relaxed) - static_cast<uint32_t>(free_stack_.size());
}

uint64_t SlotAllocator::double_frees() const {
  std::lock_guard<std::mutex> lock(mu_);
  return double_frees_;
}

uint64_t SlotAllocator::exhausted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exhausted_;
}

}  // namespace kvtier
