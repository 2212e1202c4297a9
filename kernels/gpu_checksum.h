// XXH3-64 of block payloads computed on the GPU, equal bit for bit to XXH3_64bits of the same
// bytes (common/checksum.h's PayloadChecksum): what a block born in T0 records at publish and what
// a GPU put commits, without a trip of the payload through a CPU core. T2 verifies the value when
// the block is first written to disk, as for any put.
//
// Two sources:
//   Payloads     contiguous payloads in device memory (a T0 slot) or mapped pinned host memory;
//                any length (0 included) and any alignment.
//   CacheBlocks  engine blocks of a paged KV cache (kernels/kv_layout.h), hashed as the
//                block-major payload a put would gather from them ([layer][k,v][token][head][dim])
//                without gathering it: the same value as PayloadChecksum of CopyKvReference's
//                payload. Needs row_bytes, every stride and every base address 8-byte aligned
//                (InvalidArgument otherwise).
//
// Ordering: the work is enqueued on `stream` after what was enqueued there before; `out` (device
// memory or mapped pinned host memory, room for one uint64_t per item) holds the values once that
// work completes. One thread block hashes one payload; a batch of many payloads fills the GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "kernels/gpu_runtime.h"
#include "kernels/kv_layout.h"

namespace kvtier {

// OK when GpuChecksummer::CacheBlocks can hash blocks of `cache`: a valid layout whose payload is
// under 4 GiB, with row_bytes, every stride and every base address 8-byte aligned. InvalidArgument
// naming what is not. Every variant (a caller checks before it commits to a transfer).
absl::Status CheckChecksumLayout(const PagedKvCache& cache);

class GpuChecksummer {
 public:
  // On the current device, with the kernel's code loaded and descriptor buffers allocated (so a
  // first checksum pays neither). FailedPrecondition in the CPU-only variant.
  static absl::StatusOr<std::unique_ptr<GpuChecksummer>> Create();
  virtual ~GpuChecksummer() = default;

  // out[i] = XXH3_64bits(payloads[i], bytes[i]). InvalidArgument when the spans differ in length
  // or a payload is null with bytes above 0.
  virtual absl::Status Payloads(std::span<const void* const> payloads,
                                std::span<const uint32_t> bytes, uint64_t* out,
                                gpu::StreamHandle stream) = 0;
  // out[i] = XXH3-64 of engine block engine_blocks[i]'s payload. InvalidArgument for an invalid
  // layout, a negative block id, misalignment (above), or a payload of 4 GiB or more.
  virtual absl::Status CacheBlocks(const PagedKvCache& cache,
                                   std::span<const int32_t> engine_blocks, uint64_t* out,
                                   gpu::StreamHandle stream) = 0;
};

}  // namespace kvtier
