#include "engine/tokenizer.h"

#include "engine/utf8.h"
#include "fmt/format.h"

namespace kvtier::engine {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tokenizer.json";
  KVTIER_ASSIGN_OR_RETURN(std::string json, ReadFile(path));
  KVTIER_ASSIGN_OR_RETURN(TokenizerSpec spec, ParseTokenizerJson(json, path.string()));
  KVTIER_ASSIGN_OR_RETURN(TokenizerConfig config, LoadTokenizerConfig(dir));
  auto tokenizer = Create(std::move(spec), std::move(config));
  if (!tokenizer.ok()) {
    return absl::Status(
        tokenizer.status().code(),
        fmt::format("{}: {}", dir.string(), std::string(tokenizer.status().message())));
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec,
                                                             TokenizerConfig config) {
  auto in_file = [](const absl::Status& s) {
    return absl::Status(s.code(), fmt::format("tokenizer.json: {}", std::string(s.message())));
  };
  auto pre_tokenizer = PreTokenizer::Create(spec.pre_tokenizer);
  if (!pre_tokenizer.ok()) return in_file(pre_tokenizer.status());
  auto model = BpeModel::Create(spec.model);
  if (!model.ok()) return in_file(model.status());
  auto t = std::unique_ptr<Tokenizer>(new Tokenizer(std::move(spec), std::move(config),
                                                    std::move(pre_tokenizer).value(),
                                                    std::move(model).value()));
  KVTIER_RETURN_IF_ERROR(t->ResolveSpecialTokens());
  return t;
}

Tokenizer::Tokenizer(TokenizerSpec spec, TokenizerConfig config, PreTokenizer pre_tokenizer,
                     std::unique_ptr<BpeModel> model)
    : added_(std::move(spec.added_tokens)),
      normalizer_(std::move(spec.normalizer)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      model_(std::move(model)),
      prefix_ids_(std::move(spec.prefix_ids)),
      suffix_ids_(std::move(spec.suffix_ids)),
      decoder_(Decoder::Create(spec.decoder, *model_, added_)),
      config_(std::move(config)) {}

absl::Status Tokenizer::ResolveSpecialTokens() {
  auto resolve = [&](const std::optional<std::string>& text, const char* key,
                     std::optional<TokenId>* id, std::string* out) -> absl::Status {
    if (!text.has_value()) return absl::OkStatus();
    *out = *text;
    *id = TokenToId(*text);
    if (!id->has_value()) {
      return absl::InvalidArgumentError(
          fmt::format("tokenizer_config.json: {} \"{}\" is not a token", key, *text));
    }
    return absl::OkStatus();
  };
  std::optional<TokenId> eos;
  KVTIER_RETURN_IF_ERROR(
      resolve(config_.bos_token, "bos_token", &special_.bos, &special_.bos_token));
  KVTIER_RETURN_IF_ERROR(resolve(config_.eos_token, "eos_token", &eos, &special_.eos_token));
  KVTIER_RETURN_IF_ERROR(
      resolve(config_.pad_token, "pad_token", &special_.pad, &special_.pad_token));
  KVTIER_RETURN_IF_ERROR(
      resolve(config_.unk_token, "unk_token", &special_.unk, &special_.unk_token));
  // generation_config.json decides what ends generation when it says (Llama 3.1: three ids).
  if (config_.bos_token_id.has_value()) special_.bos = config_.bos_token_id;
  if (config_.pad_token_id.has_value()) special_.pad = config_.pad_token_id;
  special_.eos = config_.eos_token_ids;
  if (special_.eos.empty() && eos.has_value()) special_.eos.push_back(*eos);
  return absl::OkStatus();
}

std::optional<TokenId> Tokenizer::TokenToId(std::string_view token) const {
  if (auto id = added_.IdOf(token)) return id;
  return model_->TokenToId(token);
}

absl::StatusOr<std::vector<TokenId>> Tokenizer::Encode(std::string_view text,
                                                       bool add_special_tokens) const {
  if (const size_t valid = ValidPrefixLength(text); valid != text.size()) {
    return absl::InvalidArgumentError(
        fmt::format("text to encode is not valid UTF-8 at byte {}", valid));
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + prefix_ids_.size() + suffix_ids_.size());
  if (add_special_tokens) ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  std::vector<TextSegment> segments;
  added_.Split(text, /*normalized=*/false, &segments);
  for (const TextSegment& s : segments) {
    if (s.id.has_value()) {
      ids.push_back(*s.id);
    } else {
      KVTIER_RETURN_IF_ERROR(EncodeText(s.text, &ids));
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

// Text between raw-matched added tokens: normalize, then look for tokens matched in normalized
// text, then pre-tokenize and merge what is left.
absl::Status Tokenizer::EncodeText(std::string_view text, std::vector<TokenId>* ids) const {
  const std::string normalized = normalizer_.Normalize(text);
  if (!added_.HasNormalized()) return EncodeNormalized(normalized, ids);
  std::vector<TextSegment> segments;
  added_.Split(normalized, /*normalized=*/true, &segments);
  for (const TextSegment& s : segments) {
    if (s.id.has_value()) {
      ids->push_back(*s.id);
    } else {
      KVTIER_RETURN_IF_ERROR(EncodeNormalized(s.text, ids));
    }
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodeNormalized(std::string_view text, std::vector<TokenId>* ids) const {
  std::string prefixed;
  if (pre_tokenizer_.add_prefix_space() && !text.empty() && text[0] != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  std::vector<std::string_view> words;
  KVTIER_RETURN_IF_ERROR(pre_tokenizer_.Split(text, &words));
  for (const std::string_view w : words) model_->EncodeWord(w, ids);
  return absl::OkStatus();
}

std::string Tokenizer::Decode(absl::Span<const TokenId> ids, bool skip_special_tokens) const {
  Decoder::State state = decoder_.Start();
  std::string text;
  for (const TokenId id : ids) {
    if (skip_special_tokens && added_.IsSpecial(id)) continue;
    text += decoder_.Push(&state, id);
  }
  return text + decoder_.Finish(&state);
}

}  // namespace kvtier::engine
