// GPU variant of kernels/kv_copy.h: KvCopier over the vendor runtime wrappers (host code only).
//
// Kernel path: the descriptors (layer bases, then (block id, payload) per entry) are written to
// pinned staging, uploaded to device memory by an async copy on the caller's stream, and read by
// the one launch that follows it there. Each descriptor buffer pair is a ring slot guarded by an
// event recorded after its launch; a slot is reused only once its event has fired, and the ring
// grows while every slot is in flight (up to kMaxSlots, then the oldest is waited for).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kv_copy.h"
#include "kernels/kv_copy_launch.h"
#include "kernels/kv_copy_plan.h"
#include "kernels/launch_status.h"

namespace kvtier {
namespace {

constexpr size_t kMaxSlots = 16;
constexpr unsigned kWarpsPerBlock = 8;
constexpr unsigned kBlocksPerMultiprocessor = 4;

// Pinned staging and device memory for one launch's descriptors, and the event after its launch.
struct DescriptorSlot {
  void* staging = nullptr;  // pinned host
  void* device = nullptr;
  size_t capacity = 0;  // bytes of each
  gpu::Event done;
  bool in_flight = false;  // `done` has been recorded
  uint64_t last_use = 0;
};

class GpuKvCopier final : public KvCopier {
 public:
  GpuKvCopier(unsigned threads, unsigned max_grid) : threads_(threads), max_grid_(max_grid) {}
  ~GpuKvCopier() override;

  absl::Status Copy(const PagedKvCache& cache, KvCopyDirection direction,
                    std::span<const int32_t> engine_blocks, std::span<void* const> payloads,
                    KvCopyPath path, gpu::StreamHandle stream) override;

 private:
  absl::Status CopyByDma(const PagedKvCache& cache, KvCopyDirection direction,
                         std::span<const int32_t> engine_blocks, std::span<void* const> payloads,
                         gpu::StreamHandle stream);
  absl::Status CopyByKernel(const PagedKvCache& cache, KvCopyDirection direction,
                            std::span<const int32_t> engine_blocks, std::span<void* const> payloads,
                            gpu::StreamHandle stream);
  absl::StatusOr<DescriptorSlot*> FreeSlot(size_t bytes);

  const unsigned threads_;
  const unsigned max_grid_;
  std::vector<gpu::CopyOp> ops_;  // reused by the DMA path
  std::vector<DescriptorSlot> slots_;
  uint64_t uses_ = 0;
};

GpuKvCopier::~GpuKvCopier() {
  for (DescriptorSlot& s : slots_) {
    // A launch may still read the slot: wait for it before the memory goes back.
    if (s.in_flight) (void)s.done.Synchronize();
    (void)gpu::PinnedFree(s.staging);
    (void)gpu::DeviceFree(s.device);
  }
}

absl::Status GpuKvCopier::Copy(const PagedKvCache& cache, KvCopyDirection direction,
                               std::span<const int32_t> engine_blocks,
                               std::span<void* const> payloads, KvCopyPath path,
                               gpu::StreamHandle stream) {
  KVTIER_RETURN_IF_ERROR(kv_copy_internal::CheckCopyArgs(cache, engine_blocks, payloads));
  if (path == KvCopyPath::kDma && !cache.pieces_contiguous()) {
    return absl::FailedPreconditionError(
        "KV copy: the DMA path needs contiguous pieces (this layout's rows are strided); use "
        "the kernel path");
  }
  if (engine_blocks.empty()) return absl::OkStatus();
  if (path == KvCopyPath::kDma) {
    return CopyByDma(cache, direction, engine_blocks, payloads, stream);
  }
  return CopyByKernel(cache, direction, engine_blocks, payloads, stream);
}

absl::Status GpuKvCopier::CopyByDma(const PagedKvCache& cache, KvCopyDirection direction,
                                    std::span<const int32_t> engine_blocks,
                                    std::span<void* const> payloads, gpu::StreamHandle stream) {
  kv_copy_internal::PlanPieceCopies(cache, direction, engine_blocks, payloads, ops_);
  return gpu::CopyBatchAsync(ops_, stream);
}

absl::StatusOr<DescriptorSlot*> GpuKvCopier::FreeSlot(size_t bytes) {
  DescriptorSlot* oldest = nullptr;
  for (DescriptorSlot& s : slots_) {
    if (s.in_flight) {
      KVTIER_ASSIGN_OR_RETURN(const bool done, s.done.Done());
      if (!done) {
        if (oldest == nullptr || s.last_use < oldest->last_use) oldest = &s;
        continue;
      }
      s.in_flight = false;
    }
    if (s.capacity >= bytes) return &s;
  }
  DescriptorSlot* slot = nullptr;
  for (DescriptorSlot& s : slots_) {
    if (!s.in_flight) slot = &s;  // free but too small: grow it
  }
  if (slot == nullptr && slots_.size() < kMaxSlots) {
    KVTIER_ASSIGN_OR_RETURN(gpu::Event ev, gpu::Event::Create());
    slots_.push_back(DescriptorSlot{});
    slots_.back().done = std::move(ev);
    slot = &slots_.back();
  }
  if (slot == nullptr) {  // every slot in flight and the ring is full
    KVTIER_RETURN_IF_ERROR(oldest->done.Synchronize());
    oldest->in_flight = false;
    slot = oldest;
  }
  if (slot->capacity < bytes) {
    const size_t grown = std::max<size_t>(bytes, 4096);
    KVTIER_RETURN_IF_ERROR(gpu::PinnedFree(std::exchange(slot->staging, nullptr)));
    KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(std::exchange(slot->device, nullptr)));
    slot->capacity = 0;
    KVTIER_ASSIGN_OR_RETURN(slot->staging, gpu::PinnedAlloc(grown));
    KVTIER_ASSIGN_OR_RETURN(slot->device, gpu::DeviceAlloc(grown));
    slot->capacity = grown;
  }
  return slot;
}

absl::Status GpuKvCopier::CopyByKernel(const PagedKvCache& cache, KvCopyDirection direction,
                                       std::span<const int32_t> engine_blocks,
                                       std::span<void* const> payloads, gpu::StreamHandle stream) {
  const size_t layer_words = size_t{cache.num_layers()} * 2;
  const size_t bytes = (layer_words + engine_blocks.size() * 2) * sizeof(uint64_t);
  KVTIER_ASSIGN_OR_RETURN(DescriptorSlot * slot, FreeSlot(bytes));
  auto* words = static_cast<uint64_t*>(slot->staging);
  for (uint32_t l = 0; l < cache.num_layers(); ++l) {
    words[2 * l] = reinterpret_cast<uintptr_t>(cache.layers[l].k);
    words[2 * l + 1] = reinterpret_cast<uintptr_t>(cache.layers[l].v);
  }
  uint64_t* entries = words + layer_words;
  for (size_t i = 0; i < engine_blocks.size(); ++i) {
    entries[2 * i] = static_cast<uint64_t>(engine_blocks[i]);
    entries[2 * i + 1] = reinterpret_cast<uintptr_t>(payloads[i]);
  }
  KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(slot->device, slot->staging, bytes, stream));

  KvCopyParams p;
  p.layer_bases = static_cast<const uint64_t*>(slot->device);
  p.entries = p.layer_bases + layer_words;
  p.num_layers = cache.num_layers();
  p.num_blocks = static_cast<uint32_t>(engine_blocks.size());
  p.kv_heads = cache.kv_heads;
  p.rows_per_piece = cache.block_tokens * cache.kv_heads;
  p.row_bytes = static_cast<uint32_t>(cache.row_bytes());
  p.unit_bytes = kv_copy_internal::CopyUnitBytes(cache, payloads);
  p.piece_bytes = cache.piece_bytes();
  p.block_stride = cache.block_stride;
  p.token_stride = cache.token_stride;
  p.head_stride = cache.head_stride;
  p.pieces_contiguous = cache.pieces_contiguous();
  p.to_payload = direction == KvCopyDirection::kCacheToPayload;
  const uint64_t pieces = uint64_t{p.num_blocks} * p.num_layers * 2;
  const unsigned grid = static_cast<unsigned>(std::min<uint64_t>(pieces, max_grid_));
  const absl::Status launched =
      gpu::StatusFromVendorCode(LaunchKvCopy(p, grid, threads_, stream), "KV copy kernel launch");
  // Recorded even after a failed launch: the upload above may still be reading the staging.
  KVTIER_RETURN_IF_ERROR(slot->done.Record(stream));
  slot->in_flight = true;
  slot->last_use = ++uses_;
  return launched;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCopier>> KvCopier::Create() {
  KVTIER_ASSIGN_OR_RETURN(const int device, gpu::CurrentDevice());
  KVTIER_ASSIGN_OR_RETURN(const gpu::DeviceInfo info, gpu::GetDeviceInfo(device));
  // Whole warps, whatever the vendor's warp size; enough resident blocks per multiprocessor to
  // keep the memory system (and PCIe, for mapped host payloads) busy.
  const unsigned threads = std::min(kWarpsPerBlock * static_cast<unsigned>(info.warp_size), 1024u);
  const unsigned grid = kBlocksPerMultiprocessor * static_cast<unsigned>(info.multiprocessors);
  return std::unique_ptr<KvCopier>(new GpuKvCopier(threads, grid));
}

}  // namespace kvtier
