// RMSNorm as transformers' LlamaRMSNorm computes it in float32:
//   out = weight * x / sqrt(mean(x^2) + eps)
// Also used per head for Qwen3's q_norm / k_norm (rows = tokens * heads, dim = head_dim).
#pragma once

#include <cstdint>

namespace kvtier::ops::ref {

// x      [rows, dim]
// weight [dim]
// out    [rows, dim]; may be x (in place)
void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out);

// The decoder layer's "add the sublayer's output to the residual stream, then normalize", fused
// (flashinfer's fused_add_rmsnorm): for each row
//   residual = residual + input;  input = RmsNorm(residual) * weight
// input    [rows, dim]  in: the sublayer's output; out: the normalized sum
// residual [rows, dim]  in: the residual stream; out: the residual stream plus input
// weight   [dim]
void FusedAddRmsNorm(float* input, float* residual, const float* weight, int64_t rows, int64_t dim,
                     float eps);

}  // namespace kvtier::ops::ref
