// The added tokens of a tokenizer.json ("added_tokens": special tokens such as <|im_start|> and
// plain added ones such as <think>): found in the text before pre-tokenization, as Hugging Face
// `tokenizers` does, so they are never split by the regex or merged by BPE. Matching is
// leftmost-longest. Flags: `lstrip`/`rstrip` take the whitespace before/after the match into it;
// `single_word` matches only a token not touching a word character on either side; `normalized`
// tokens are matched in the normalized text, the others in the raw text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/bpe.h"
#include "engine/string_map.h"

namespace kvtier::engine {

struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
  bool special = false;
};

// A piece of text: an added token (`id` set) or text for the normalizer and BPE.
struct TextSegment {
  std::string_view text;
  std::optional<TokenId> id;
};

// Immutable after construction; safe to share between threads.
class AddedVocabulary {
 public:
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // Appends the segments of `text` to `out`, matching only tokens whose `normalized` flag equals
  // `normalized`. Segments are views into `text`; together they cover it except for whitespace
  // that lstrip/rstrip tokens absorb.
  void Split(std::string_view text, bool normalized, std::vector<TextSegment>* out) const;

  const AddedToken* Find(TokenId id) const;
  std::optional<TokenId> IdOf(std::string_view content) const;
  bool IsSpecial(TokenId id) const;
  bool HasNormalized() const { return has_normalized_; }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Trie {
    absl::flat_hash_map<uint64_t, uint32_t> edges;  // (node << 8 | byte) -> child node
    std::vector<int32_t> token;                     // node -> index into tokens_, or -1
    bool first_byte[256] = {};
  };
  // The longest token of `trie` starting at text[pos]: its index into tokens_, or -1.
  int32_t LongestAt(const Trie& trie, std::string_view text, size_t pos, size_t* end) const;
  bool AcceptMatch(const AddedToken& t, std::string_view text, size_t begin, size_t end) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<TokenId, size_t> by_id_;
  StringMap<TokenId> by_content_;
  Trie tries_[2];  // [0]: tokens matched in raw text, [1]: in normalized text
  bool has_normalized_ = false;
};

}  // namespace kvtier::engine
