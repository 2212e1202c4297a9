#include <cmath>

#include "kernels/ops/rms_norm.h"

namespace kvtier::ops::ref {
namespace {

// 1 / sqrt(mean(x^2) + eps); the sum in double so that the reference's own error is negligible.
float InverseRms(const float* x, int64_t dim, float eps) {
  double sum = 0;
  for (int64_t j = 0; j < dim; ++j) sum += static_cast<double>(x[j]) * x[j];
  return static_cast<float>(1.0 / std::sqrt(sum / dim + eps));
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
             float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    float* o = out + r * dim;
    const float scale = InverseRms(in, dim, eps);
    for (int64_t j = 0; j < dim; ++j) o[j] = weight[j] * (in[j] * scale);
  }
}

void FusedAddRmsNorm(float* input, float* residual, const float* weight, int64_t rows, int64_t dim,
                     float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* in = input + r * dim;
    float* res = residual + r * dim;
    for (int64_t j = 0; j < dim; ++j) res[j] += in[j];
    const float scale = InverseRms(res, dim, eps);
    for (int64_t j = 0; j < dim; ++j) in[j] = weight[j] * (res[j] * scale);
  }
}

}  // namespace kvtier::ops::ref
