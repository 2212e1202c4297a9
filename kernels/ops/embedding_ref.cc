#include <algorithm>

#include "kernels/ops/embedding.h"

namespace kvtier::ops::ref {

void Embedding(const int32_t* ids, int64_t n, const float* table, int64_t vocab, int64_t hidden,
               float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = table + static_cast<int64_t>(ids[i]) * hidden;
    std::copy(row, row + hidden, out + i * hidden);
  }
}

}  // namespace kvtier::ops::ref
