#include "kernels/ops/gemm.h"

namespace kvtier::ops::ref {
namespace {

// Eight independent partial sums let the compiler vectorize without reassociating (no fast-math).
float Dot(const float* a, const float* b, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    for (int lane = 0; lane < 8; ++lane) acc[lane] += a[j + lane] * b[j + lane];
  }
  for (; j < k; ++j) acc[j % 8] += a[j] * b[j];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

void Gemm(const float* x, const float* w, const float* bias, int64_t m, int64_t n, int64_t k,
          float* y) {
  // Rows of x in the inner loop: each weight row is read once per block of 4 rows of x.
  constexpr int64_t kRowBlock = 4;
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t i1 = i0 + kRowBlock < m ? i0 + kRowBlock : m;
    for (int64_t o = 0; o < n; ++o) {
      const float* wrow = w + o * k;
      const float b = bias != nullptr ? bias[o] : 0.0f;
      for (int64_t i = i0; i < i1; ++i) y[i * n + o] = Dot(x + i * k, wrow, k) + b;
    }
  }
}

}  // namespace kvtier::ops::ref
