// CopyKvReference: kernels/kv_copy.h's copy with one memcpy per (token, head) row, on host memory.
#include <cstring>

#include "kernels/kv_copy.h"
#include "kernels/kv_copy_plan.h"

namespace kvtier {

using kv_copy_internal::CachePiece;
using kv_copy_internal::PayloadPiece;

absl::Status CopyKvReference(const PagedKvCache& cache, KvCopyDirection direction,
                             std::span<const int32_t> engine_blocks,
                             std::span<void* const> payloads) {
  KVTIER_RETURN_IF_ERROR(kv_copy_internal::CheckCopyArgs(cache, engine_blocks, payloads));
  const size_t row = cache.row_bytes();
  const bool to_payload = direction == KvCopyDirection::kCacheToPayload;
  for (size_t i = 0; i < engine_blocks.size(); ++i) {
    for (uint32_t layer = 0; layer < cache.num_layers(); ++layer) {
      for (uint32_t kv = 0; kv < 2; ++kv) {
        char* engine = CachePiece(cache, layer, kv, engine_blocks[i]);
        char* slot = PayloadPiece(cache, payloads[i], layer, kv);
        for (uint32_t t = 0; t < cache.block_tokens; ++t) {
          for (uint32_t h = 0; h < cache.kv_heads; ++h) {
            char* e = engine + int64_t{t} * cache.token_stride + int64_t{h} * cache.head_stride;
            char* s = slot + (uint64_t{t} * cache.kv_heads + h) * row;  // [token][head][dim]
            std::memcpy(to_payload ? s : e, to_payload ? e : s, row);
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kvtier
