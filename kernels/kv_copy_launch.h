// Internal to kernels/: the launcher kv_copy_kernel.cu exports to kv_copy_gpu.cc (kernel path of
// kernels/kv_copy.h). Device-safe: no runtime or abseil headers.
#pragma once

#include <cstdint>

namespace kvtier {

// Everything one launch needs. The descriptor arrays live in device memory:
//   layer_bases [num_layers][2]  K and V base addresses of each layer (engine block 0)
//   entries     [num_blocks][2]  engine block id, payload address (device or mapped host)
struct KvCopyParams {
  const uint64_t* layer_bases = nullptr;
  const uint64_t* entries = nullptr;
  uint32_t num_layers = 0;
  uint32_t num_blocks = 0;
  uint32_t kv_heads = 0;
  uint32_t rows_per_piece = 0;  // block_tokens * kv_heads
  uint32_t row_bytes = 0;
  uint32_t unit_bytes = 0;   // 16, 8, 4, 2 or 1: divides every address, stride and row_bytes
  uint64_t piece_bytes = 0;  // rows_per_piece * row_bytes
  int64_t block_stride = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  bool pieces_contiguous = false;  // engine piece laid out as the payload piece: no row arithmetic
  bool to_payload = false;         // gather (cache -> payload) or scatter (payload -> cache)
};

// Enqueues the copy of every (block, layer, K|V) piece on `stream` as one launch of `grid` thread
// blocks of `threads` threads. Returns the vendor's error code (0 = success).
int LaunchKvCopy(const KvCopyParams& params, unsigned grid, unsigned threads, void* stream);

// Loads the code of every variant LaunchKvCopy may launch onto the current device now: CUDA loads
// a kernel lazily at its first launch, which would land inside a client's first transfer. Returns
// the vendor's error code (0 = success).
int PreloadKvCopyKernels();

}  // namespace kvtier
