// The CPU backend's paged KV cache: fp32 slots in the daemon's payload layout
// (kernels/ops/paged_kv.h: [layer][k,v][token][kv_head][head_dim] per slot), allocated up front.
// The GPU backend's pool is the same layout in device memory (or the daemon's T0 pool).
//
// Thread-safety: not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/ops/paged_kv.h"

namespace kvtier::engine {

class CpuKvPool {
 public:
  // num_slots * geometry.slot_elems() floats. Precondition: sizes > 0.
  CpuKvPool(const ops::PagedKvGeometry& geometry, int32_t num_slots);
  // A view of num_slots slots at `external` (not owned; it must outlive the pool and hold
  // num_slots * geometry.slot_elems() floats): e.g. the daemon's T1 memory, whose slots the
  // daemon hands out (daemon_kv_blocks.h), so Allocate and Free are not used on it.
  CpuKvPool(const ops::PagedKvGeometry& geometry, int32_t num_slots, float* external);

  // A free slot, or ResourceExhausted when all num_slots are in use.
  absl::StatusOr<int32_t> Allocate();
  // Returns `slot` (from Allocate, not yet freed) to the pool.
  void Free(int32_t slot);

  const ops::PagedKvGeometry& geometry() const { return geometry_; }
  int32_t num_slots() const { return num_slots_; }
  int32_t free_slots() const { return static_cast<int32_t>(free_.size()); }
  float* data() { return data_; }  // [num_slots, slot_elems]
  const float* data() const { return data_; }

 private:
  ops::PagedKvGeometry geometry_;
  int32_t num_slots_;
  std::vector<float> owned_;  // empty for a view
  float* data_;
  std::vector<int32_t> free_;  // a stack: the most recently freed slot is reused first
};

}  // namespace kvtier::engine
