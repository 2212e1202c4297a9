// GPU variant of kernels/kv_copy.h: KvCopier over the vendor runtime wrappers (host code only).
//
// Kernel path: the descriptors (layer bases, then (block id, payload) per entry) go to the device
// through a DescriptorRing (kernels/descriptor_ring.h) and are read by the one launch that follows
// their upload on the caller's stream.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/descriptor_ring.h"
#include "kernels/kv_copy.h"
#include "kernels/kv_copy_launch.h"
#include "kernels/kv_copy_plan.h"
#include "kernels/launch_status.h"

namespace kvtier {
namespace {

constexpr unsigned kWarpsPerBlock = 8;
constexpr unsigned kBlocksPerMultiprocessor = 4;
constexpr size_t kPreparedLaunches = 8;
constexpr size_t kPreparedDescriptorBytes = 4096;  // 32 layers and 112 blocks; more grows a slot

class GpuKvCopier final : public KvCopier {
 public:
  GpuKvCopier(unsigned threads, unsigned max_grid) : threads_(threads), max_grid_(max_grid) {}

  // The first transfer's costs, paid at creation: loading the kernels' code, and descriptor
  // buffers for a put's chunked launches in flight (GpuClientOptions::commit_chunks, 8).
  absl::Status Prepare() {
    KVTIER_RETURN_IF_ERROR(
        gpu::StatusFromVendorCode(PreloadKvCopyKernels(), "loading the KV copy kernels"));
    return descriptors_.Reserve(kPreparedLaunches, kPreparedDescriptorBytes);
  }

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

  const unsigned threads_;
  const unsigned max_grid_;
  std::vector<gpu::CopyOp> ops_;  // reused by the DMA path
  gpu::DescriptorRing descriptors_;
};

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

absl::Status GpuKvCopier::CopyByKernel(const PagedKvCache& cache, KvCopyDirection direction,
                                       std::span<const int32_t> engine_blocks,
                                       std::span<void* const> payloads, gpu::StreamHandle stream) {
  const size_t layer_words = size_t{cache.num_layers()} * 2;
  const size_t bytes = (layer_words + engine_blocks.size() * 2) * sizeof(uint64_t);
  KVTIER_ASSIGN_OR_RETURN(void* staging, descriptors_.Acquire(bytes));
  auto* words = static_cast<uint64_t*>(staging);
  for (uint32_t l = 0; l < cache.num_layers(); ++l) {
    words[2 * l] = reinterpret_cast<uintptr_t>(cache.layers[l].k);
    words[2 * l + 1] = reinterpret_cast<uintptr_t>(cache.layers[l].v);
  }
  uint64_t* entries = words + layer_words;
  for (size_t i = 0; i < engine_blocks.size(); ++i) {
    entries[2 * i] = static_cast<uint64_t>(engine_blocks[i]);
    entries[2 * i + 1] = reinterpret_cast<uintptr_t>(payloads[i]);
  }
  KVTIER_RETURN_IF_ERROR(descriptors_.Upload(bytes, stream));

  KvCopyParams p;
  p.layer_bases = static_cast<const uint64_t*>(descriptors_.device());
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
  KVTIER_RETURN_IF_ERROR(descriptors_.Retire(stream));  // even after a failed launch
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
  auto copier = std::make_unique<GpuKvCopier>(threads, grid);
  KVTIER_RETURN_IF_ERROR(copier->Prepare());
  return copier;
}

}  // namespace kvtier
