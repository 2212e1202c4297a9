#include "tools/serve_bench/synthetic_prompt.h"

#include <algorithm>
#include <unordered_set>

#include "common/mix.h"

namespace kvtier::serve_bench {

int32_t TokenFor(uint64_t hash_id, uint32_t position, const PromptOptions& options) {
  const uint64_t block = SplitMix64Finalize(options.seed ^ SplitMix64Finalize(hash_id));
  const uint64_t x = SplitMix64Finalize(block + position);
  return static_cast<int32_t>(x % options.vocab_size);
}

PromptShape ShapeOf(const TraceRequest& request, const PromptOptions& options) {
  PromptShape p;
  const uint64_t ids = request.hash_ids.size();
  const uint64_t scaled =
      (uint64_t{request.input_length} * options.block_tokens + options.trace_block_tokens - 1) /
      options.trace_block_tokens;
  p.full_length = static_cast<int64_t>(std::clamp<uint64_t>(scaled, 1, ids * options.block_tokens));
  p.max_tokens = std::max<int64_t>(request.output_length, 1);
  if (options.max_output_tokens > 0)
    p.max_tokens = std::min(p.max_tokens, options.max_output_tokens);
  p.length = p.full_length;
  if (options.max_prompt_tokens > 0) p.length = std::min(p.length, options.max_prompt_tokens);
  if (options.max_model_len > 0) {
    // prompt + max_tokens <= max_model_len. (kvtier serve accepts one token more, as the last
    // token's K/V is never stored, but its engine then stops a token short of max_tokens.)
    p.max_tokens = std::clamp<int64_t>(options.max_model_len - 1, 1, p.max_tokens);
    p.length = std::clamp<int64_t>(options.max_model_len - p.max_tokens, 1, p.length);
  }
  return p;
}

std::vector<int32_t> PromptTokens(const TraceRequest& request, int64_t length,
                                  const PromptOptions& options) {
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(length));
  for (int64_t t = 0; t < length; ++t) {
    const uint64_t hash = request.hash_ids[static_cast<size_t>(t / options.block_tokens)];
    tokens.push_back(TokenFor(hash, static_cast<uint32_t>(t % options.block_tokens), options));
  }
  return tokens;
}

std::vector<int64_t> IdealCachedTokens(const std::vector<TraceRequest>& requests,
                                       const std::vector<PromptShape>& shapes,
                                       uint32_t block_tokens) {
  std::unordered_set<uint64_t> seen;
  std::vector<int64_t> out;
  out.reserve(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    const std::vector<uint64_t>& ids = requests[r].hash_ids;
    size_t run = 0;
    while (run < ids.size() && seen.contains(ids[run])) ++run;
    const int64_t sent = shapes[r].length;
    out.push_back(std::min<int64_t>(static_cast<int64_t>(run) * block_tokens, sent));
    // Only the blocks this request sent in full or in part can be cached by it.
    const size_t sent_blocks = static_cast<size_t>((sent + block_tokens - 1) / block_tokens);
    seen.insert(ids.begin(),
                ids.begin() + static_cast<std::ptrdiff_t>(std::min(sent_blocks, ids.size())));
  }
  return out;
}

}  // namespace kvtier::serve_bench
