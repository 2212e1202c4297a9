// Internal to kernels/ (GPU variants): device-side argument buffers for kernel launches that read
// per-launch descriptors (block lists, addresses). A launch's descriptors are written to pinned
// staging, uploaded by an async copy on the launch's stream, and read by the launch that follows
// there. Each staging/device pair is a ring slot guarded by an event recorded after its launch: a
// slot is reused only once that event has fired, and the ring grows while every slot is in flight
// (up to kMaxSlots, then the oldest is waited for).
//
// Not thread-safe: one caller at a time (the owner of the launching object).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/gpu_runtime.h"

namespace kvtier::gpu {

class DescriptorRing {
 public:
  static constexpr size_t kMaxSlots = 16;

  DescriptorRing() = default;
  DescriptorRing(const DescriptorRing&) = delete;
  DescriptorRing& operator=(const DescriptorRing&) = delete;
  // Waits for launches still reading a slot, then frees the memory.
  ~DescriptorRing();

  // Allocates `slots` slots (at most kMaxSlots in all) of at least `bytes` each now, so the first
  // launches that need them allocate nothing (a pinned allocation takes far longer than a launch).
  absl::Status Reserve(size_t slots, size_t bytes);
  // Pinned staging of at least `bytes` for the caller to fill; its device twin is device().
  absl::StatusOr<void*> Acquire(size_t bytes);
  // Slots allocated so far (Reserve's, and those Acquire added while all were in flight).
  size_t slots() const { return slots_.size(); }
  // The device buffer of the slot the last Acquire returned.
  void* device() const { return slots_[current_].device; }
  // Uploads the first `bytes` of the acquired staging on `stream` (before the launch).
  absl::Status Upload(size_t bytes, StreamHandle stream);
  // Marks the acquired slot in use until the work enqueued on `stream` so far completes. Call it
  // after the launch, even a failed one (the upload may still be reading the staging).
  absl::Status Retire(StreamHandle stream);

 private:
  struct Slot {
    void* staging = nullptr;  // pinned host
    void* device = nullptr;
    size_t capacity = 0;  // bytes of each
    Event done;
    bool in_flight = false;  // `done` has been recorded
    uint64_t last_use = 0;
  };
  absl::StatusOr<Slot*> FreeSlot(size_t bytes);
  absl::Status Grow(Slot& slot, size_t bytes);

  std::vector<Slot> slots_;
  size_t current_ = 0;
  uint64_t uses_ = 0;
};

}  // namespace kvtier::gpu
