// Reads a Hugging Face tokenizer.json into plain structs (TokenizerSpec), so the parts that run
// (normalizer, pre-tokenizer, BPE, added tokens, decoder) know nothing of JSON. Supported, because
// real Llama 3 / Qwen2.5 / Qwen3 / Mistral (tekken) and Llama 2 / Mistral 7B (SentencePiece-style)
// files use them: normalizer null/NFC/NFD/NFKC/NFKD/Prepend/Replace(string)/Sequence;
// pre-tokenizer null/Split/ByteLevel/Digits/Sequence; model BPE (byte_fallback, fuse_unk);
// post-processor null/ByteLevel/TemplateProcessing/Sequence; decoder ByteLevel, or a Sequence of
// Replace/ByteFallback/Fuse/Strip. Anything else is an Unimplemented error naming the JSON path
// and the type, never a tokenizer that silently differs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/added_tokens.h"
#include "engine/bpe.h"
#include "engine/decoder.h"
#include "engine/normalizer.h"
#include "engine/pretokenizer.h"

namespace kvtier::engine {

struct TokenizerSpec {
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  BpeSpec model;
  std::vector<AddedToken> added_tokens;
  // The post-processor's template for one sequence when special tokens are added: the ids to put
  // before and after the text (TemplateProcessing's "single"; empty for files without one).
  std::vector<TokenId> prefix_ids;
  std::vector<TokenId> suffix_ids;
  DecoderSpec decoder;
};

// Parses the text of a tokenizer.json. `origin` (its path) prefixes every error message.
absl::StatusOr<TokenizerSpec> ParseTokenizerJson(std::string_view json, std::string_view origin);

}  // namespace kvtier::engine
