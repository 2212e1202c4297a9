// Choosing the next token from one row of logits: greedy, or sampling with temperature, top-k and
// top-p applied in transformers' order (TemperatureLogitsWarper, TopKLogitsWarper,
// TopPLogitsWarper), from a seeded counter-based random number so that a (seed, step) pair gives
// the same token on every run and every backend (a GPU kernel computes the same Uniform()).
#pragma once

#include <cstdint>

namespace kvtier::ops {

struct SamplingParams {
  float temperature = 0;  // 0: greedy (Argmax); else logits are divided by it
  int32_t top_k = 0;      // 0: off; else keep the k most likely tokens
  float top_p = 1;        // 1: off; else keep the most likely tokens until their mass reaches
                          // top_p (the token that crosses it included; at least one token)
  uint64_t seed = 0;
};

namespace ref {

// The index of the largest logit; the lowest index among equal ones (torch.argmax). NaN logits
// are never chosen unless logits[0] is NaN.
// logits [vocab], vocab >= 1
int32_t Argmax(const float* logits, int64_t vocab);

// A uniform float in [0, 1) from (seed, counter): SplitMix64 of the pair, top 24 bits. Pure.
float Uniform(uint64_t seed, uint64_t counter);

// The token for generation step `step` (the counter of the random draw).
// logits [vocab]; preconditions: vocab >= 1, temperature >= 0, top_k >= 0, 0 < top_p <= 1.
// Ties in probability are ordered by token id; NaN logits count as -inf. Greedy when
// temperature == 0.
int32_t Sample(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t step);

}  // namespace ref
}  // namespace kvtier::ops
