// kernels/descriptor_ring.h over the vendor runtime wrappers (host code only).
#include "kernels/descriptor_ring.h"

#include <algorithm>
#include <utility>

namespace kvtier::gpu {

DescriptorRing::~DescriptorRing() {
  for (Slot& s : slots_) {
    // A launch may still read the slot: wait for it before the memory goes back.
    if (s.in_flight) (void)s.done.Synchronize();
    (void)PinnedFree(s.staging);
    (void)DeviceFree(s.device);
  }
}

absl::Status DescriptorRing::Reserve(size_t slots, size_t bytes) {
  while (slots_.size() < std::min(slots, kMaxSlots)) {
    KVTIER_ASSIGN_OR_RETURN(Event ev, Event::Create());
    slots_.push_back(Slot{});
    slots_.back().done = std::move(ev);
  }
  for (Slot& s : slots_) {
    if (!s.in_flight) KVTIER_RETURN_IF_ERROR(Grow(s, bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> DescriptorRing::Acquire(size_t bytes) {
  KVTIER_ASSIGN_OR_RETURN(Slot * slot, FreeSlot(bytes));
  current_ = static_cast<size_t>(slot - slots_.data());
  return slot->staging;
}

absl::Status DescriptorRing::Upload(size_t bytes, StreamHandle stream) {
  const Slot& s = slots_[current_];
  return CopyAsync(s.device, s.staging, bytes, stream);
}

absl::Status DescriptorRing::Retire(StreamHandle stream) {
  Slot& s = slots_[current_];
  KVTIER_RETURN_IF_ERROR(s.done.Record(stream));
  s.in_flight = true;
  s.last_use = ++uses_;
  return absl::OkStatus();
}

absl::StatusOr<DescriptorRing::Slot*> DescriptorRing::FreeSlot(size_t bytes) {
  Slot* oldest = nullptr;
  Slot* free_small = nullptr;  // free but too small: grown below if nothing fits
  for (Slot& s : slots_) {
    if (s.in_flight) {
      KVTIER_ASSIGN_OR_RETURN(const bool done, s.done.Done());
      if (!done) {
        if (oldest == nullptr || s.last_use < oldest->last_use) oldest = &s;
        continue;
      }
      s.in_flight = false;
    }
    if (s.capacity >= bytes) return &s;
    free_small = &s;
  }
  Slot* slot = free_small;
  if (slot == nullptr && slots_.size() < kMaxSlots) {
    KVTIER_ASSIGN_OR_RETURN(Event ev, Event::Create());
    slots_.push_back(Slot{});
    slots_.back().done = std::move(ev);
    slot = &slots_.back();
  }
  if (slot == nullptr) {  // every slot in flight and the ring is full
    KVTIER_RETURN_IF_ERROR(oldest->done.Synchronize());
    oldest->in_flight = false;
    slot = oldest;
  }
  KVTIER_RETURN_IF_ERROR(Grow(*slot, bytes));
  return slot;
}

absl::Status DescriptorRing::Grow(Slot& slot, size_t bytes) {
  if (slot.capacity >= bytes) return absl::OkStatus();
  const size_t grown = std::max<size_t>(bytes, 4096);
  KVTIER_RETURN_IF_ERROR(PinnedFree(std::exchange(slot.staging, nullptr)));
  KVTIER_RETURN_IF_ERROR(DeviceFree(std::exchange(slot.device, nullptr)));
  slot.capacity = 0;
  KVTIER_ASSIGN_OR_RETURN(slot.staging, PinnedAlloc(grown));
  KVTIER_ASSIGN_OR_RETURN(slot.device, DeviceAlloc(grown));
  slot.capacity = grown;
  return absl::OkStatus();
}

}  // namespace kvtier::gpu
