#include <cmath>

#include "kernels/ops/rope.h"

namespace kvtier::ops::ref {

void ApplyRope(float* x, const int32_t* positions, const float* inv_freq, int64_t n, int64_t heads,
               int64_t head_dim) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < n; ++i) {
    const float pos = static_cast<float>(positions[i]);
    for (int64_t j = 0; j < half; ++j) {
      const float angle = pos * inv_freq[j];  // float32 product, as transformers computes it
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      for (int64_t h = 0; h < heads; ++h) {
        float* row = x + (i * heads + h) * head_dim;
        const float x0 = row[j];
        const float x1 = row[j + half];
        row[j] = x0 * c - x1 * s;
        row[j + half] = x1 * c + x0 * s;
      }
    }
  }
}

}  // namespace kvtier::ops::ref
