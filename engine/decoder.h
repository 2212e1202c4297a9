// Turns token ids back into text as the decoder of a tokenizer.json does, one token at a time so
// that streaming output and whole decodes are the same function:
//  - ByteLevel (Llama 3, Qwen, Mistral tekken): each token's bytes, joined; bytes that can never
//    form a character become U+FFFD (one per maximal invalid subpart, as from_utf8_lossy);
//  - SentencePiece-style Sequence (Llama 2, Mistral 7B, Gemma): Replace ("▁" -> " ") on each token,
//    ByteFallback (a run of <0xXX> tokens is its bytes if they are valid UTF-8, else one U+FFFD
//    per byte), Fuse, and Strip of leading characters of the whole text.
// Output pieces are always valid UTF-8: bytes that may still complete a character are held back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/added_tokens.h"
#include "engine/bpe.h"

namespace kvtier::engine {

struct DecoderSpec {
  bool byte_level = false;
  std::vector<std::pair<std::string, std::string>> replacements;  // per token, in order
  bool byte_fallback = false;
  size_t strip_start = 0;     // Strip after Fuse: at most this many leading `strip_content`
  std::string strip_content;  // characters are removed from the start of the text
};

// Immutable after Create; safe to share between threads (each decode has its own State).
class Decoder {
 public:
  static Decoder Create(const DecoderSpec& spec, const BpeModel& model,
                        const AddedVocabulary& added);

  struct State {
    std::string pending;  // bytes not yet emitted (an incomplete character, or a byte run)
    size_t strip_left = 0;
  };
  State Start() const { return State{std::string(), spec_.strip_start}; }
  // The text `id` completes (possibly empty); ids outside the vocabulary add nothing.
  std::string Push(State* state, TokenId id) const;
  // What is still held back, rendered as a whole decode renders the end of the text.
  std::string Finish(State* state) const;

  // What `id` decodes to on its own: bytes (byte-level; possibly part of a character) or text.
  std::string_view Piece(TokenId id) const;
  size_t size() const { return pieces_.size(); }

 private:
  std::string FlushRun(State* state) const;
  std::string Strip(State* state, std::string text) const;

  DecoderSpec spec_;
  std::vector<std::string> pieces_;
  std::vector<int16_t> byte_of_;  // the byte of a <0xXX> token (byte_fallback), else -1
};

}  // namespace kvtier::engine
