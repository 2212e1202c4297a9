#include "engine/stream_decoder.h"

namespace kvtier::engine {

std::string StreamDecoder::Push(TokenId id) {
  if (skip_special_tokens_ && tokenizer_.IsSpecial(id)) return std::string();
  return tokenizer_.decoder().Push(&state_, id);
}

std::string StreamDecoder::Finish() {
  std::string out = tokenizer_.decoder().Finish(&state_);
  state_ = tokenizer_.decoder().Start();
  return out;
}

}  // namespace kvtier::engine
