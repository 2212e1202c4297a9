// How an engine's paged KV cache is laid out, so kvtier can move whole blocks between it and
// block-major payloads (DESIGN.md "Words": payload layout [layer][k,v][token][kv_head][head_dim]).
//
// The engine side is described per layer by two base pointers (K and V of engine block 0) and
// three byte strides shared by all layers: between engine blocks, between tokens of one block, and
// between KV heads of one token. One (token, head) row of head_dim elements is contiguous. That
// covers the layouts engines use today (the factories below):
//   vLLM        per layer [2, num_blocks, block_tokens, kv_heads, head_dim]
//   FlashInfer  per layer [num_blocks, 2, block_tokens, kv_heads, head_dim]   ("NHD")
//               per layer [num_blocks, 2, kv_heads, block_tokens, head_dim]   ("HND")
//   SGLang MHA  per layer K and V buffers [num_tokens, kv_heads, head_dim], pages of block_tokens
// An engine block holds exactly block_tokens tokens: the engine's page size equals the
// namespace's block_tokens (kvtier's default 16 is vLLM's default block size).
//
// Pointers are device addresses in the engine's process. This header is plain data: usable by the
// CPU reference, the kernels' host wrappers and the client library alike.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace kvtier {

struct PagedKvLayer {
  void* k = nullptr;  // K of engine block 0, token 0, head 0 of this layer
  void* v = nullptr;  // V of the same
};

struct PagedKvCache {
  std::vector<PagedKvLayer> layers;
  uint32_t block_tokens = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t elem_bytes = 0;   // 2 for bf16/fp16, 1 for fp8, 4 for fp32
  int64_t block_stride = 0;  // bytes from engine block b to b + 1 (same layer, same K or V)
  int64_t token_stride = 0;  // bytes from token t to t + 1 within a block
  int64_t head_stride = 0;   // bytes from head h to h + 1 within a token

  uint32_t num_layers() const { return static_cast<uint32_t>(layers.size()); }
  // Bytes of one (token, head) row: head_dim * elem_bytes.
  uint64_t row_bytes() const { return uint64_t{head_dim} * elem_bytes; }
  // Bytes of one block's payload: layers * 2 * block_tokens * kv_heads * row_bytes.
  uint64_t payload_bytes() const;
  // Bytes of one (layer, K or V) piece of a payload: block_tokens * kv_heads * row_bytes.
  uint64_t piece_bytes() const;
  // True when one (block, layer, K or V) piece of the engine cache is one contiguous run laid out
  // as the payload's piece ([token][head][dim]): then the DMA path can move it with one copy.
  bool pieces_contiguous() const;
};

// Checks sizes are positive, strides leave rows from overlapping, and every layer has both
// pointers; InvalidArgument naming the field otherwise.
absl::Status ValidatePagedKvCache(const PagedKvCache& cache);

// Factories for the layouts above. `layer_bases[l]` is the base of layer l's tensor (for SGLang,
// `k_bases[l]` / `v_bases[l]` are the layer's K and V buffers); `num_blocks` is the tensor's block
// dimension (vLLM needs it to find V).
PagedKvCache VllmLayout(std::span<void* const> layer_bases, uint32_t num_blocks,
                        uint32_t block_tokens, uint32_t kv_heads, uint32_t head_dim,
                        uint32_t elem_bytes);
PagedKvCache FlashInferNhdLayout(std::span<void* const> layer_bases, uint32_t block_tokens,
                                 uint32_t kv_heads, uint32_t head_dim, uint32_t elem_bytes);
PagedKvCache FlashInferHndLayout(std::span<void* const> layer_bases, uint32_t block_tokens,
                                 uint32_t kv_heads, uint32_t head_dim, uint32_t elem_bytes);
PagedKvCache SglangMhaLayout(std::span<void* const> k_bases, std::span<void* const> v_bases,
                             uint32_t block_tokens, uint32_t kv_heads, uint32_t head_dim,
                             uint32_t elem_bytes);

}  // namespace kvtier
