#include "engine/gpu_kv_pool.h"

#include <fmt/format.h>

#include "kernels/gpu_runtime.h"

namespace kvtier::engine {

namespace {

absl::Status CheckSizes(const ops::PagedKvGeometry& geometry, int32_t num_slots) {
  if (num_slots <= 0 || geometry.slot_elems() <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("GpuKvPool: {} slots of {} elements: both must be positive", num_slots,
                    geometry.slot_elems()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuKvPool>> GpuKvPool::Create(const ops::PagedKvGeometry& geometry,
                                                             int32_t num_slots,
                                                             ops::gpu::DType dtype) {
  KVTIER_RETURN_IF_ERROR(CheckSizes(geometry, num_slots));
  const size_t bytes = static_cast<size_t>(num_slots) * geometry.slot_elems() * 2;
  KVTIER_ASSIGN_OR_RETURN(void* data, gpu::DeviceAlloc(bytes));
  if (absl::Status zeroed = gpu::MemsetAsync(data, 0, bytes, nullptr); !zeroed.ok()) {
    (void)gpu::DeviceFree(data);
    return zeroed;
  }
  if (absl::Status synced = gpu::DeviceSynchronize(); !synced.ok()) {
    (void)gpu::DeviceFree(data);
    return synced;
  }
  return std::unique_ptr<GpuKvPool>(new GpuKvPool(geometry, num_slots, dtype, data, true));
}

absl::StatusOr<std::unique_ptr<GpuKvPool>> GpuKvPool::View(const ops::PagedKvGeometry& geometry,
                                                           int32_t num_slots, ops::gpu::DType dtype,
                                                           void* data) {
  KVTIER_RETURN_IF_ERROR(CheckSizes(geometry, num_slots));
  if (data == nullptr) return absl::InvalidArgumentError("GpuKvPool::View of a null address");
  return std::unique_ptr<GpuKvPool>(new GpuKvPool(geometry, num_slots, dtype, data, false));
}

GpuKvPool::GpuKvPool(const ops::PagedKvGeometry& geometry, int32_t num_slots, ops::gpu::DType dtype,
                     void* data, bool owned)
    : geometry_(geometry), num_slots_(num_slots), dtype_(dtype), data_(data), owned_(owned) {
  free_.reserve(num_slots);
  for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);  // slot 0 first
}

GpuKvPool::~GpuKvPool() {
  if (owned_) (void)gpu::DeviceFree(data_);
}

uint64_t GpuKvPool::bytes() const {
  return static_cast<uint64_t>(num_slots_) * static_cast<uint64_t>(geometry_.slot_elems()) * 2;
}

absl::StatusOr<int32_t> GpuKvPool::Allocate() {
  if (free_.empty()) {
    return absl::ResourceExhaustedError(
        fmt::format("the GPU KV pool's {} slots of {} tokens are all in use", num_slots_,
                    geometry_.block_tokens));
  }
  const int32_t slot = free_.back();
  free_.pop_back();
  return slot;
}

void GpuKvPool::Free(int32_t slot) { free_.push_back(slot); }

}  // namespace kvtier::engine
