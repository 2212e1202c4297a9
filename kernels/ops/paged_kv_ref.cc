#include <algorithm>

#include "kernels/ops/paged_kv.h"

namespace kvtier::ops::ref {

void WriteKv(const float* k, const float* v, const int64_t* token_slots, int64_t n,
             const PagedKvGeometry& geometry, int64_t layer, float* pool) {
  const int64_t row = geometry.token_elems();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = token_slots[i] / geometry.block_tokens;
    const int64_t token = token_slots[i] % geometry.block_tokens;
    std::copy(k + i * row, k + (i + 1) * row, pool + geometry.Offset(slot, layer, 0, token));
    std::copy(v + i * row, v + (i + 1) * row, pool + geometry.Offset(slot, layer, 1, token));
  }
}

}  // namespace kvtier::ops::ref
