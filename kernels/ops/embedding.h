// Token embedding lookup: out[i, :] = table[ids[i], :] (transformers' nn.Embedding).
#pragma once

#include <cstdint>

namespace kvtier::ops::ref {

// ids   [n]              token ids; precondition: 0 <= ids[i] < vocab (the engine checks)
// table [vocab, hidden]  embed_tokens.weight
// out   [n, hidden]
void Embedding(const int32_t* ids, int64_t n, const float* table, int64_t vocab, int64_t hidden,
               float* out);

}  // namespace kvtier::ops::ref
