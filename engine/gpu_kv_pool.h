// The GPU backend's paged KV cache: 16-bit slots in device memory in the daemon's payload layout
// (kernels/ops/paged_kv.h: [layer][k,v][token][kv_head][head_dim] per slot, one slot per block),
// so the attention kernels read a block where it lies — the layout a T0 slot of the daemon has.
// The slots are allocated up front, in one device allocation.
//
// Thread-safety: not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "kernels/ops/gpu/ops_gpu.h"
#include "kernels/ops/paged_kv.h"

namespace kvtier::engine {

class GpuKvPool {
 public:
  // num_slots * geometry.slot_elems() 16-bit elements of `dtype` on the current device, zeroed.
  // InvalidArgument for non-positive sizes; the vendor's error (out of memory) as a Status.
  static absl::StatusOr<std::unique_ptr<GpuKvPool>> Create(const ops::PagedKvGeometry& geometry,
                                                           int32_t num_slots,
                                                           ops::gpu::DType dtype);
  // A pool over device memory someone else owns and keeps alive longer than the pool (the
  // daemon's T0 as this process maps it: GpuClient::T0SlotData(0)), slot s at
  // data + s * slot_elems * 2 bytes. Nothing is zeroed or freed. InvalidArgument for non-positive
  // sizes or a null `data`.
  static absl::StatusOr<std::unique_ptr<GpuKvPool>> View(const ops::PagedKvGeometry& geometry,
                                                         int32_t num_slots, ops::gpu::DType dtype,
                                                         void* data);
  ~GpuKvPool();
  GpuKvPool(const GpuKvPool&) = delete;
  GpuKvPool& operator=(const GpuKvPool&) = delete;

  // A free slot, or ResourceExhausted when all num_slots are in use.
  absl::StatusOr<int32_t> Allocate();
  // Returns `slot` (from Allocate, not yet freed) to the pool.
  void Free(int32_t slot);

  const ops::PagedKvGeometry& geometry() const { return geometry_; }
  ops::gpu::DType dtype() const { return dtype_; }
  int32_t num_slots() const { return num_slots_; }
  int32_t free_slots() const { return static_cast<int32_t>(free_.size()); }
  uint64_t bytes() const;
  void* data() const { return data_; }  // [num_slots, slot_elems] in device memory

 private:
  GpuKvPool(const ops::PagedKvGeometry& geometry, int32_t num_slots, ops::gpu::DType dtype,
            void* data, bool owned);

  ops::PagedKvGeometry geometry_;
  int32_t num_slots_;
  ops::gpu::DType dtype_;
  void* data_;
  bool owned_;                 // Create's allocation (freed with the pool), not a View
  std::vector<int32_t> free_;  // a stack: the most recently freed slot is reused first
};

}  // namespace kvtier::engine
