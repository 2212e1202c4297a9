// The MLP's gated activation (transformers' LlamaMLP: down(act(gate(x)) * up(x)), act = SiLU).
// The gate and up projections are one GEMM against [gate; up] stacked (vLLM's gate_up_proj), so
// the input holds both halves side by side.
#pragma once

#include <cstdint>

namespace kvtier::ops::ref {

// gate_up [n, 2 * d]  columns [0, d) are gate(x), [d, 2d) are up(x)
// out     [n, d]      silu(gate) * up, silu(g) = g / (1 + exp(-g))
void SiluAndMul(const float* gate_up, int64_t n, int64_t d, float* out);

}  // namespace kvtier::ops::ref
