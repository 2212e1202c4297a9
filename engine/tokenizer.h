// A Hugging Face BPE tokenizer that gives the token ids `tokenizers` gives, for byte-level files
// (Llama 3, Qwen2.5/3, Mistral tekken) and SentencePiece-style ones (Llama 2, Mistral 7B: "▁" for
// spaces, <0xXX> byte fallback): added tokens found first (engine/added_tokens.h), then on the
// text between them the normalizer, the pre-tokenizer regexes (PCRE2) and BPE merges; the
// post-processor's special tokens when asked. Decoding is the file's decoder (engine/decoder.h),
// with invalid UTF-8 replaced by U+FFFD as `tokenizers` does; engine/stream_decoder.h does the
// same one token at a time.
//
// Thread-safety: all methods are const and safe to call concurrently.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "common/status.h"
#include "engine/added_tokens.h"
#include "engine/bpe.h"
#include "engine/decoder.h"
#include "engine/normalizer.h"
#include "engine/pretokenizer.h"
#include "engine/tokenizer_config.h"
#include "engine/tokenizer_json.h"

namespace kvtier::engine {

struct SpecialTokens {
  std::optional<TokenId> bos, pad, unk;
  std::vector<TokenId> eos;                                // generation stops at any of these
  std::string bos_token, eos_token, pad_token, unk_token;  // their texts ("" when none)
};

class Tokenizer {
 public:
  // Loads `dir`/tokenizer.json and `dir`/tokenizer_config.json (plus generation_config.json and
  // chat_template.jinja when present). Errors name the file and what in it is wrong or unsupported.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::filesystem::path& dir);
  // From an already parsed tokenizer.json and config (tests, and Load).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec,
                                                           TokenizerConfig config);

  // The ids of `text`, which must be valid UTF-8 (else InvalidArgument naming the byte offset).
  // `add_special_tokens` adds what the post-processor adds (Llama 3 and Mistral: BOS; Qwen:
  // nothing), as `tokenizers`' encode(text, add_special_tokens=True) does.
  absl::StatusOr<std::vector<TokenId>> Encode(std::string_view text, bool add_special_tokens) const;

  // The text of `ids`; ids not in the vocabulary are skipped, as are special tokens when
  // `skip_special_tokens`.
  std::string Decode(absl::Span<const TokenId> ids, bool skip_special_tokens = false) const;

  // What token `id` decodes to on its own (byte-level: bytes, possibly part of a character);
  // empty for an unknown id.
  std::string_view TokenBytes(TokenId id) const { return decoder_.Piece(id); }
  // The decoder behind Decode, for StreamDecoder.
  const Decoder& decoder() const { return decoder_; }
  bool IsSpecial(TokenId id) const { return added_.IsSpecial(id); }
  // The id of a token spelled as in tokenizer.json (added tokens included).
  std::optional<TokenId> TokenToId(std::string_view token) const;
  // One more than the largest id (the size an embedding table needs at least).
  size_t vocab_size() const { return decoder_.size(); }

  const SpecialTokens& special_tokens() const { return special_; }
  const TokenizerConfig& config() const { return config_; }

 private:
  Tokenizer(TokenizerSpec spec, TokenizerConfig config, PreTokenizer pre_tokenizer,
            std::unique_ptr<BpeModel> model);
  absl::Status ResolveSpecialTokens();
  absl::Status EncodeText(std::string_view text, std::vector<TokenId>* ids) const;
  absl::Status EncodeNormalized(std::string_view text, std::vector<TokenId>* ids) const;

  AddedVocabulary added_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::vector<TokenId> prefix_ids_, suffix_ids_;
  Decoder decoder_;
  TokenizerConfig config_;
  SpecialTokens special_;
};

}  // namespace kvtier::engine
