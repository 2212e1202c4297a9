// Rotary position embedding, neox style (transformers' apply_rotary_pos_emb with rotate_half): the
// pairs rotated are (j, j + head_dim/2), by the angle position * inv_freq[j] computed in float32
// as transformers does. inv_freq comes from engine/rope_config.h (default or llama3 scaling).
#pragma once

#include <cstdint>

namespace kvtier::ops::ref {

// x         [n, heads, head_dim]  rotated in place; head_dim even
// positions [n]                   the absolute position of each token (>= 0)
// inv_freq  [head_dim / 2]
//   x[i,h,j]            = x0 * cos(a) - x1 * sin(a)
//   x[i,h,j+head_dim/2] = x1 * cos(a) + x0 * sin(a)
//   where x0 = x[i,h,j], x1 = x[i,h,j+head_dim/2], a = float(positions[i]) * inv_freq[j]
void ApplyRope(float* x, const int32_t* positions, const float* inv_freq, int64_t n, int64_t heads,
               int64_t head_dim);

}  // namespace kvtier::ops::ref
