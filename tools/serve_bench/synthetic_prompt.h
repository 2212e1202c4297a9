// A trace request turned into what `kvtier serve-bench` sends: prompt token ids derived from the
// request's hash ids, and max_tokens.
//
// Block i of the prompt is `block_tokens` ids, each a seeded mix of (hash_ids[i], position in the
// block) reduced into the vocabulary. The trace's hash ids are prefix-chained (equal ids mean an
// equal block after an equal prefix), so two requests whose hash ids share a leading run share
// exactly that run of token blocks: the server's prefix cache sees the sharing the trace recorded,
// and nothing else (distinct ids give different blocks with overwhelming probability).
//
// Lengths: `block_tokens` tokens per hash id (default: the trace's own block size), the prompt's
// length scaled by block_tokens / trace_block_tokens (so the last, partial block stays partial),
// then cut to max_prompt_tokens and to what the context leaves beside max_tokens. A shorter block
// makes the real trace's shape fit a tiny model's context in tests.
#pragma once

#include <cstdint>
#include <vector>

#include "tools/serve_bench/bench_trace.h"

namespace kvtier::serve_bench {

struct PromptOptions {
  uint32_t trace_block_tokens = 512;  // tokens per hash id in the trace
  uint32_t block_tokens = 512;        // tokens per hash id sent
  uint32_t vocab_size = 0;            // ids are in [0, vocab_size); > 0
  uint64_t seed = 0;
  int64_t max_prompt_tokens = 0;  // 0: no cap
  int64_t max_output_tokens = 0;  // 0: no cap (the trace's output length)
  int64_t max_model_len = 0;      // the server's context; 0: unknown, no cap
};

// How long a request's prompt is and how many tokens it asks for (the tokens themselves are made
// only when it is sent: the whole real trace at 512 tokens per id is ~150M tokens).
struct PromptShape {
  int64_t length = 1;
  int64_t max_tokens = 1;
  int64_t full_length = 1;  // the prompt's length before the caps
  bool truncated() const { return length < full_length; }
};

PromptShape ShapeOf(const TraceRequest& request, const PromptOptions& options);

// The token id at `position` of the block standing for `hash_id`.
int32_t TokenFor(uint64_t hash_id, uint32_t position, const PromptOptions& options);

// The first `length` tokens of the request's prompt (length <= hash_ids.size() * block_tokens).
std::vector<int32_t> PromptTokens(const TraceRequest& request, int64_t length,
                                  const PromptOptions& options);

// For each request in order, the prompt tokens an infinite prefix cache would hold: the leading run
// of hash ids earlier requests already sent, in tokens (capped by the prompt's length). The
// ceiling for the cached tokens a replay in this order can show.
std::vector<int64_t> IdealCachedTokens(const std::vector<TraceRequest>& requests,
                                       const std::vector<PromptShape>& shapes,
                                       uint32_t block_tokens);

}  // namespace kvtier::serve_bench
