#include "engine/sequence.h"

#include <utility>

namespace kvtier::engine {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

Sequence::Sequence(uint64_t id, std::vector<int32_t> prompt, RequestOptions options)
    : id_(id),
      options_(std::move(options)),
      tokens_(std::move(prompt)),
      num_prompt_tokens_(static_cast<int64_t>(tokens_.size())) {}

const BlockKey& Sequence::BlockKeyAt(int64_t i, int64_t block_tokens, const BlockKey& root) {
  if (i < static_cast<int64_t>(block_keys_.size())) return block_keys_[i];
  std::vector<uint32_t> block(block_tokens);
  while (static_cast<int64_t>(block_keys_.size()) <= i) {
    const int64_t j = static_cast<int64_t>(block_keys_.size());
    const BlockKey& parent = j == 0 ? root : block_keys_[j - 1];
    for (int64_t t = 0; t < block_tokens; ++t) {
      block[t] = static_cast<uint32_t>(tokens_[j * block_tokens + t]);
    }
    block_keys_.push_back(ChainTokenBlock(parent, block));
  }
  return block_keys_[i];
}

}  // namespace kvtier::engine
