// kernels/kv_copy_plan.h, and the parts of kernels/kv_copy.h every variant shares.
#include "kernels/kv_copy_plan.h"

#include <fmt/format.h>

namespace kvtier {

const char* KvCopyPathName(KvCopyPath path) { return path == KvCopyPath::kDma ? "dma" : "kernel"; }

namespace kv_copy_internal {

absl::Status CheckCopyArgs(const PagedKvCache& cache, std::span<const int32_t> engine_blocks,
                           std::span<void* const> payloads) {
  KVTIER_RETURN_IF_ERROR(ValidatePagedKvCache(cache));
  if (engine_blocks.size() != payloads.size()) {
    return absl::InvalidArgumentError(fmt::format("KV copy: {} engine blocks but {} payloads",
                                                  engine_blocks.size(), payloads.size()));
  }
  for (size_t i = 0; i < engine_blocks.size(); ++i) {
    if (engine_blocks[i] < 0) {
      return absl::InvalidArgumentError(
          fmt::format("KV copy: engine_blocks[{}] is negative ({})", i, engine_blocks[i]));
    }
    if (payloads[i] == nullptr) {
      return absl::InvalidArgumentError(fmt::format("KV copy: payloads[{}] is null", i));
    }
  }
  return absl::OkStatus();
}

char* CachePiece(const PagedKvCache& cache, uint32_t layer, uint32_t kv, int32_t block) {
  const PagedKvLayer& l = cache.layers[layer];
  return static_cast<char*>(kv == 0 ? l.k : l.v) + int64_t{block} * cache.block_stride;
}

char* PayloadPiece(const PagedKvCache& cache, void* payload, uint32_t layer, uint32_t kv) {
  return static_cast<char*>(payload) + (uint64_t{layer} * 2 + kv) * cache.piece_bytes();
}

void PlanPieceCopies(const PagedKvCache& cache, KvCopyDirection direction,
                     std::span<const int32_t> engine_blocks, std::span<void* const> payloads,
                     std::vector<gpu::CopyOp>& ops) {
  ops.clear();
  const size_t piece = cache.piece_bytes();
  const bool to_payload = direction == KvCopyDirection::kCacheToPayload;
  for (size_t i = 0; i < engine_blocks.size(); ++i) {
    for (uint32_t layer = 0; layer < cache.num_layers(); ++layer) {
      for (uint32_t kv = 0; kv < 2; ++kv) {
        char* engine = CachePiece(cache, layer, kv, engine_blocks[i]);
        char* slot = PayloadPiece(cache, payloads[i], layer, kv);
        char* dst = to_payload ? slot : engine;
        const char* src = to_payload ? engine : slot;
        if (!ops.empty()) {
          gpu::CopyOp& last = ops.back();
          if (static_cast<char*>(last.dst) + last.bytes == dst &&
              static_cast<const char*>(last.src) + last.bytes == src) {
            last.bytes += piece;  // FlashInfer's K and V, or consecutive blocks and slots
            continue;
          }
        }
        ops.push_back({dst, src, piece});
      }
    }
  }
}

uint32_t CopyUnitBytes(const PagedKvCache& cache, std::span<void* const> payloads) {
  uint64_t bits = cache.row_bytes() | static_cast<uint64_t>(cache.block_stride) |
                  static_cast<uint64_t>(cache.token_stride) |
                  static_cast<uint64_t>(cache.head_stride) | cache.piece_bytes() | 16;
  for (const PagedKvLayer& l : cache.layers) {
    bits |= reinterpret_cast<uintptr_t>(l.k) | reinterpret_cast<uintptr_t>(l.v);
  }
  for (void* p : payloads) bits |= reinterpret_cast<uintptr_t>(p);
  return static_cast<uint32_t>(bits & (~bits + 1));  // lowest set bit: at most 16
}

}  // namespace kv_copy_internal
}  // namespace kvtier
