// Moving KV blocks between an engine's paged KV cache (kernels/kv_layout.h) and block-major
// payloads (a T0 slot in device memory, or a T1 slot reached through mapped pinned host memory).
//
// Block i of a batch pairs engine block `engine_blocks[i]` with `payloads[i]`: every layer's K and
// V of that engine block, in payload order [layer][k,v][token][kv_head][head_dim].
//   kCacheToPayload (a put):  gather the engine's pieces into the payload.
//   kPayloadToCache (a get):  scatter the payload into the engine's pieces.
//
// Two paths, chosen by the caller per transfer (DESIGN.md "Performance": DMA wins end to end for
// contiguous pieces because kernels take SMs from the model; kernels win for small scattered ones):
//   kDma     one DMA per contiguous (block, layer, K|V) piece, batched on the stream; needs
//            cache.pieces_contiguous() (FailedPrecondition otherwise — use the kernel).
//   kKernel  one launch for the whole batch, all layers; any layout kv_layout.h describes.
// Both are copies: the bytes that land are exactly the CPU reference's (CopyKvReference).
//
// Within one batch the pieces may move in any order or at once: engine blocks must be distinct and
// payloads must not overlap (a scatter of one engine block twice has no defined winner).
//
// Ordering: the work is enqueued on `stream` (the engine's, typically) and ordered after whatever
// was enqueued there before; nothing blocks the host. The caller records an event after it to
// learn when the data has landed, and keeps payloads and cache alive and untouched till then.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "kernels/gpu_runtime.h"
#include "kernels/kv_layout.h"

namespace kvtier {

enum class KvCopyDirection { kCacheToPayload, kPayloadToCache };
enum class KvCopyPath { kDma, kKernel };

const char* KvCopyPathName(KvCopyPath path);  // "dma" | "kernel"

// CPU reference: the same copy with memcpy, on host pointers (tests build an engine cache in host
// memory with the same layout). Checks arguments like KvCopier::Copy.
absl::Status CopyKvReference(const PagedKvCache& cache, KvCopyDirection direction,
                             std::span<const int32_t> engine_blocks,
                             std::span<void* const> payloads);

// Enqueues batches of block copies. Owns the device-side descriptor buffers the kernel path reads
// (reused once the launch that read them has completed), so create one per stream or per thread
// and keep it. Not thread-safe: one caller at a time.
class KvCopier {
 public:
  // On the current device, with the kernels' code loaded and descriptor buffers for 8 launches in
  // flight allocated (so a first copy pays neither). FailedPrecondition in the CPU-only variant.
  static absl::StatusOr<std::unique_ptr<KvCopier>> Create();
  virtual ~KvCopier() = default;

  // InvalidArgument when the layout is invalid, the spans differ in length, or a block id is
  // negative; FailedPrecondition for kDma on a layout without contiguous pieces; Internal for a
  // runtime error (the message names the call).
  virtual absl::Status Copy(const PagedKvCache& cache, KvCopyDirection direction,
                            std::span<const int32_t> engine_blocks, std::span<void* const> payloads,
                            KvCopyPath path, gpu::StreamHandle stream) = 0;
};

}  // namespace kvtier
