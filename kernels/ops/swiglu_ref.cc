#include <cmath>

#include "kernels/ops/swiglu.h"

namespace kvtier::ops::ref {

void SiluAndMul(const float* gate_up, int64_t n, int64_t d, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* gate = gate_up + i * 2 * d;
    const float* up = gate + d;
    for (int64_t j = 0; j < d; ++j) {
      const float g = gate[j];
      out[i * d + j] = g / (1.0f + std::exp(-g)) * up[j];
    }
  }
}

}  // namespace kvtier::ops::ref
