// Decodes generated tokens one at a time into text that is always valid UTF-8: a character split
// across tokens (an emoji is often 2-4 byte tokens) is held back until its last byte arrives.
// The concatenation of every Push() and the final Finish() equals Tokenizer::Decode of all the
// ids (the same U+FFFD replacements for bytes that can never form a character).
//
// Not thread-safe: one decoder per sequence. The tokenizer must outlive it.
#pragma once

#include <string>

#include "engine/tokenizer.h"

namespace kvtier::engine {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(tokenizer),
        skip_special_tokens_(skip_special_tokens),
        state_(tokenizer.decoder().Start()) {}

  // The text that `id` completes (possibly empty).
  std::string Push(TokenId id);

  // What is still held back, as Decode renders an incomplete character at the end (U+FFFD);
  // the decoder is then empty and may be reused.
  std::string Finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  Decoder::State state_;
};

}  // namespace kvtier::engine
