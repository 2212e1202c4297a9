// Internal to kernels/: the launcher gpu_checksum_kernel.cu exports to gpu_checksum_gpu.cc.
// Device-safe: no runtime or abseil headers.
#pragma once

#include <cstdint>

namespace kvtier {

// One launch hashes `count` items, one thread block each, into out[item].
//   Contiguous source (layer_bases == nullptr):
//     items [count][2]  payload address, payload bytes
//   Paged source (layer_bases != nullptr; every address, stride and row_bytes 8-byte aligned):
//     layer_bases [num_layers][2]  K and V base addresses of each layer (engine block 0)
//     items       [count]          engine block id; every payload is payload_bytes long
struct ChecksumParams {
  const uint64_t* items = nullptr;
  uint64_t* out = nullptr;
  uint32_t count = 0;
  const uint64_t* layer_bases = nullptr;
  uint32_t num_layers = 0;
  uint32_t kv_heads = 0;
  uint32_t row_bytes = 0;
  uint32_t piece_bytes = 0;    // block_tokens * kv_heads * row_bytes
  uint32_t payload_bytes = 0;  // num_layers * 2 * piece_bytes
  int64_t block_stride = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  bool pieces_contiguous = false;
};

// Enqueues the hashes on `stream` as one launch of `grid` blocks of `threads` threads (a multiple
// of 8, at most 1024). Returns the vendor's error code (0 = success).
int LaunchChecksum(const ChecksumParams& params, unsigned grid, unsigned threads, void* stream);

// Loads the kernel's code onto the current device now (CUDA loads kernels lazily at their first
// launch, which would land inside a client's first put). Returns the vendor's error code.
int PreloadChecksumKernel();

}  // namespace kvtier
