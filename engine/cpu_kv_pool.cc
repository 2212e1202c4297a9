#include "engine/cpu_kv_pool.h"

#include <fmt/format.h>

namespace kvtier::engine {

CpuKvPool::CpuKvPool(const ops::PagedKvGeometry& geometry, int32_t num_slots)
    : geometry_(geometry),
      num_slots_(num_slots),
      owned_(static_cast<size_t>(num_slots) * geometry.slot_elems(), 0.0f),
      data_(owned_.data()) {
  free_.reserve(num_slots);
  for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);  // slot 0 first
}

CpuKvPool::CpuKvPool(const ops::PagedKvGeometry& geometry, int32_t num_slots, float* external)
    : geometry_(geometry), num_slots_(num_slots), data_(external) {}

absl::StatusOr<int32_t> CpuKvPool::Allocate() {
  if (free_.empty()) {
    return absl::ResourceExhaustedError(fmt::format(
        "the KV pool's {} slots of {} tokens are all in use", num_slots_, geometry_.block_tokens));
  }
  const int32_t slot = free_.back();
  free_.pop_back();
  return slot;
}

void CpuKvPool::Free(int32_t slot) { free_.push_back(slot); }

}  // namespace kvtier::engine
