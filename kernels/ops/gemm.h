// The linear layer: y = x W^T (+ bias), with W as Hugging Face stores a Linear's weight, [out, in]
// row-major (so each output is a dot product of two contiguous rows).
#pragma once

#include <cstdint>

namespace kvtier::ops::ref {

// x    [m, k]
// w    [n, k]
// bias [n] or nullptr
// y    [m, n]  must not alias x or w
// Accumulates in float32 in a fixed order (8 interleaved partial sums), so results are
// deterministic; they differ from another BLAS's by summation order only (~k * 2^-24 relative).
void Gemm(const float* x, const float* w, const float* bias, int64_t m, int64_t n, int64_t k,
          float* y);

}  // namespace kvtier::ops::ref
