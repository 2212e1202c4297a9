#include "engine/stream_decoder.h"

#include "engine/utf8.h"

namespace kvtier::engine {

std::string StreamDecoder::Push(TokenId id) {
  if (skip_special_tokens_ && tokenizer_.IsSpecial(id)) return std::string();
  pending_.append(tokenizer_.TokenBytes(id));
  // Bytes before an incomplete tail are final: later bytes cannot change how they decode.
  const size_t hold = IncompleteSuffixLength(pending_);
  const std::string_view ready = std::string_view(pending_).substr(0, pending_.size() - hold);
  std::string out =
      ValidPrefixLength(ready) == ready.size() ? std::string(ready) : LossyUtf8(ready);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out = LossyUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvtier::engine
