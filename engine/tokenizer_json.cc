#include "engine/tokenizer_json.h"

#include <simdjson.h>

#include "fmt/format.h"

namespace kvtier::engine {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

absl::Status Bad(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", path, what));
}
absl::Status Unsupported(std::string_view path, std::string_view type) {
  return absl::UnimplementedError(fmt::format("{}: type \"{}\" is not supported", path, type));
}

bool IsNull(const element& e) { return e.type() == simdjson::dom::element_type::NULL_VALUE; }

// `o[key]` as a string, or an error naming `path`.key.
absl::StatusOr<std::string_view> Str(const object& o, std::string_view key, std::string_view path) {
  std::string_view s;
  if (o[key].get(s) != simdjson::SUCCESS)
    return Bad(path, fmt::format("\"{}\" must be a string", key));
  return s;
}

// Reads optional bool fields of one object (`fallback` when absent or null); the first field
// that is something else is kept as an error naming it, for the caller to return once.
class Flags {
 public:
  Flags(const object& o, std::string_view path) : o_(o), path_(path) {}

  bool Get(std::string_view key, bool fallback) {
    bool b = fallback;
    element e;
    if (o_[key].get(e) == simdjson::SUCCESS && !IsNull(e) && e.get(b) != simdjson::SUCCESS) {
      if (status_.ok()) status_ = Bad(path_, fmt::format("\"{}\" must be true or false", key));
      return fallback;
    }
    return b;
  }
  const absl::Status& status() const { return status_; }

 private:
  const object& o_;
  std::string path_;
  absl::Status status_;
};

// Replace {"pattern": {"String": ...}, "content": ...} (a Regex pattern is not supported).
absl::StatusOr<NormalizerStep> ParseReplace(const object& o, std::string_view path,
                                            NormalizerStep step) {
  std::string_view pattern, content;
  if (o["pattern"]["String"].get(pattern) != simdjson::SUCCESS) {
    return absl::UnimplementedError(
        fmt::format("{}: Replace is supported with a \"String\" pattern only", path));
  }
  KVTIER_ASSIGN_OR_RETURN(content, Str(o, "content", path));
  step.text = std::string(pattern);
  step.content = std::string(content);
  return step;
}

absl::Status ParseNormalizer(const element& e, std::string_view path,
                             std::vector<NormalizerStep>* out) {
  if (IsNull(e)) return absl::OkStatus();
  object o;
  if (e.get(o) != simdjson::SUCCESS) return Bad(path, "must be an object or null");
  KVTIER_ASSIGN_OR_RETURN(std::string_view type, Str(o, "type", path));
  if (type == "Sequence") {
    array items;
    if (o["normalizers"].get(items) != simdjson::SUCCESS)
      return Bad(path, "\"normalizers\" must be a list");
    size_t i = 0;
    for (element item : items) {
      KVTIER_RETURN_IF_ERROR(
          ParseNormalizer(item, fmt::format("{}.normalizers[{}]", path, i++), out));
    }
    return absl::OkStatus();
  }
  NormalizerStep step;
  if (type == "Prepend") {
    step.kind = NormalizerStep::Kind::kPrepend;
    KVTIER_ASSIGN_OR_RETURN(std::string_view text, Str(o, "prepend", path));
    step.text = std::string(text);
  } else if (type == "Replace") {
    step.kind = NormalizerStep::Kind::kReplace;
    KVTIER_ASSIGN_OR_RETURN(step, ParseReplace(o, path, step));
  } else {
    auto form = ParseNormalForm(type);
    if (!form.ok()) return Unsupported(path, type);
    step.form = *form;
  }
  out->push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<SplitBehavior> ParseBehavior(std::string_view b, std::string_view path) {
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  return absl::UnimplementedError(
      fmt::format("{}: split behavior \"{}\" is not supported", path, b));
}

absl::Status ParseSplit(const object& o, std::string_view path, PreTokenizerStep* step) {
  object pattern;
  if (o["pattern"].get(pattern) != simdjson::SUCCESS)
    return Bad(path, "\"pattern\" must be an object");
  std::string_view text;
  if (pattern["Regex"].get(text) == simdjson::SUCCESS) {
    step->pattern_is_regex = true;
  } else if (pattern["String"].get(text) == simdjson::SUCCESS) {
    step->pattern_is_regex = false;
  } else {
    return Bad(path, "\"pattern\" must hold \"Regex\" or \"String\"");
  }
  step->pattern = std::string(text);
  KVTIER_ASSIGN_OR_RETURN(std::string_view behavior, Str(o, "behavior", path));
  KVTIER_ASSIGN_OR_RETURN(step->behavior, ParseBehavior(behavior, path));
  Flags flags(o, path);
  step->invert = flags.Get("invert", false);
  KVTIER_RETURN_IF_ERROR(flags.status());
  return absl::OkStatus();
}

absl::Status ParsePreTokenizer(const element& e, std::string_view path,
                               std::vector<PreTokenizerStep>* out) {
  if (IsNull(e)) return absl::OkStatus();
  object o;
  if (e.get(o) != simdjson::SUCCESS) return Bad(path, "must be an object or null");
  KVTIER_ASSIGN_OR_RETURN(std::string_view type, Str(o, "type", path));
  PreTokenizerStep step;
  if (type == "Sequence") {
    array items;
    if (o["pretokenizers"].get(items) != simdjson::SUCCESS)
      return Bad(path, "\"pretokenizers\" must be a list");
    size_t i = 0;
    for (element item : items) {
      KVTIER_RETURN_IF_ERROR(
          ParsePreTokenizer(item, fmt::format("{}.pretokenizers[{}]", path, i++), out));
    }
    return absl::OkStatus();
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    KVTIER_RETURN_IF_ERROR(ParseSplit(o, path, &step));
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    Flags flags(o, path);
    step.add_prefix_space = flags.Get("add_prefix_space", true);
    step.use_regex = flags.Get("use_regex", true);
    KVTIER_RETURN_IF_ERROR(flags.status());
  } else if (type == "Digits") {
    step.kind = PreTokenizerStep::Kind::kDigits;
    Flags flags(o, path);
    step.individual_digits = flags.Get("individual_digits", false);
    KVTIER_RETURN_IF_ERROR(flags.status());
  } else {
    return Unsupported(path, type);
  }
  out->push_back(std::move(step));
  return absl::OkStatus();
}

// A merge is "a b" (older files) or ["a", "b"] (newer ones).
absl::Status ParseMerge(const element& e, size_t rank, BpeSpec* model) {
  std::string_view s;
  if (e.get(s) == simdjson::SUCCESS) {
    const size_t space = s.find(' ');
    if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos) {
      return Bad(fmt::format("model.merges[{}]", rank),
                 "must be two tokens separated by one space");
    }
    model->merges.emplace_back(std::string(s.substr(0, space)), std::string(s.substr(space + 1)));
    return absl::OkStatus();
  }
  array pair;
  std::string_view a, b;
  if (e.get(pair) != simdjson::SUCCESS || pair.size() != 2 ||
      pair.at(0).get(a) != simdjson::SUCCESS || pair.at(1).get(b) != simdjson::SUCCESS) {
    return Bad(fmt::format("model.merges[{}]", rank), "must be a string or a pair of strings");
  }
  model->merges.emplace_back(std::string(a), std::string(b));
  return absl::OkStatus();
}

absl::Status ParseModel(const element& e, BpeSpec* model) {
  object o;
  if (e.get(o) != simdjson::SUCCESS) return Bad("model", "must be an object");
  std::string_view type = "BPE";  // files written by old versions name no type
  if (o["type"].error() == simdjson::SUCCESS && o["type"].get(type) != simdjson::SUCCESS) {
    return Bad("model", "\"type\" must be a string");
  }
  if (type != "BPE") return Unsupported("model", type);
  object vocab;
  if (o["vocab"].get(vocab) != simdjson::SUCCESS) return Bad("model.vocab", "must be an object");
  model->vocab.reserve(vocab.size());
  for (auto [key, value] : vocab) {
    uint64_t id = 0;
    if (value.get(id) != simdjson::SUCCESS || id > UINT32_MAX) {
      return Bad(fmt::format("model.vocab[\"{}\"]", key), "must be an id (a non-negative integer)");
    }
    model->vocab.emplace_back(std::string(key), static_cast<TokenId>(id));
  }
  array merges;
  if (o["merges"].get(merges) != simdjson::SUCCESS) return Bad("model.merges", "must be a list");
  size_t rank = 0;
  for (element m : merges) KVTIER_RETURN_IF_ERROR(ParseMerge(m, rank++, model));
  Flags flags(o, "model");
  model->ignore_merges = flags.Get("ignore_merges", false);
  model->byte_fallback = flags.Get("byte_fallback", false);
  model->fuse_unk = flags.Get("fuse_unk", false);
  KVTIER_RETURN_IF_ERROR(flags.status());
  std::string_view s;
  if (o["unk_token"].get(s) == simdjson::SUCCESS) model->unk_token = std::string(s);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (o[key].get(s) == simdjson::SUCCESS && !s.empty()) {
      return absl::UnimplementedError(fmt::format("model.{} \"{}\" is not supported", key, s));
    }
  }
  element dropout;
  if (o["dropout"].get(dropout) == simdjson::SUCCESS && !IsNull(dropout)) {
    return absl::UnimplementedError("model.dropout is not supported (it makes encoding random)");
  }
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const element& e, std::vector<AddedToken>* out) {
  if (IsNull(e)) return absl::OkStatus();
  array items;
  if (e.get(items) != simdjson::SUCCESS) return Bad("added_tokens", "must be a list");
  size_t i = 0;
  for (element item : items) {
    const std::string path = fmt::format("added_tokens[{}]", i++);
    object o;
    uint64_t id = 0;
    if (item.get(o) != simdjson::SUCCESS || o["id"].get(id) != simdjson::SUCCESS ||
        id > UINT32_MAX) {
      return Bad(path, "must be an object with an integer \"id\"");
    }
    KVTIER_ASSIGN_OR_RETURN(std::string_view content, Str(o, "content", path));
    Flags flags(o, path);
    out->push_back(AddedToken{static_cast<TokenId>(id), std::string(content),
                              flags.Get("lstrip", false), flags.Get("rstrip", false),
                              flags.Get("single_word", false), flags.Get("normalized", true),
                              flags.Get("special", false)});
    KVTIER_RETURN_IF_ERROR(flags.status());
  }
  return absl::OkStatus();
}

// TemplateProcessing's "single": special tokens around the one "Sequence" item.
absl::Status ParseTemplate(const object& o, std::string_view path, TokenizerSpec* spec) {
  array single;
  object specials;
  if (o["single"].get(single) != simdjson::SUCCESS ||
      o["special_tokens"].get(specials) != simdjson::SUCCESS) {
    return Bad(path, "TemplateProcessing needs \"single\" and \"special_tokens\"");
  }
  bool seen_sequence = false;
  for (element item : single) {
    object piece, special;
    std::string_view name;
    if (item.get(piece) != simdjson::SUCCESS) return Bad(path, "\"single\" items must be objects");
    if (piece["Sequence"].error() == simdjson::SUCCESS) {
      seen_sequence = true;
      continue;
    }
    if (piece["SpecialToken"]["id"].get(name) != simdjson::SUCCESS ||
        specials[name].get(special) != simdjson::SUCCESS) {
      return Bad(path, "a \"single\" item is neither a Sequence nor a known SpecialToken");
    }
    array ids;
    if (special["ids"].get(ids) != simdjson::SUCCESS)
      return Bad(path, fmt::format("special_tokens[\"{}\"].ids must be a list", name));
    for (element id : ids) {
      uint64_t v = 0;
      if (id.get(v) != simdjson::SUCCESS || v > UINT32_MAX)
        return Bad(path, fmt::format("special_tokens[\"{}\"].ids must be ids", name));
      (seen_sequence ? spec->suffix_ids : spec->prefix_ids).push_back(static_cast<TokenId>(v));
    }
  }
  return absl::OkStatus();
}

// ByteLevel only changes offsets, which the engine does not report; TemplateProcessing adds ids.
absl::Status ParsePostProcessor(const element& e, std::string_view path, TokenizerSpec* spec) {
  if (IsNull(e)) return absl::OkStatus();
  object o;
  if (e.get(o) != simdjson::SUCCESS) return Bad(path, "must be an object or null");
  KVTIER_ASSIGN_OR_RETURN(std::string_view type, Str(o, "type", path));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "TemplateProcessing") return ParseTemplate(o, path, spec);
  if (type != "Sequence") return Unsupported(path, type);
  array items;
  if (o["processors"].get(items) != simdjson::SUCCESS)
    return Bad(path, "\"processors\" must be a list");
  size_t i = 0;
  for (element item : items) {
    KVTIER_RETURN_IF_ERROR(
        ParsePostProcessor(item, fmt::format("{}.processors[{}]", path, i++), spec));
  }
  return absl::OkStatus();
}

// One decoder step (engine/decoder.h): ByteLevel alone, or Replace (string pattern), ByteFallback,
// Fuse and Strip (after Fuse, from the start) in a Sequence.
absl::Status ParseDecoderStep(const object& o, std::string_view type, std::string_view path,
                              bool* fused, DecoderSpec* spec) {
  if (type == "ByteLevel") {
    spec->byte_level = true;
  } else if (type == "Replace") {
    KVTIER_ASSIGN_OR_RETURN(NormalizerStep r, ParseReplace(o, path, NormalizerStep()));
    spec->replacements.emplace_back(r.text, r.content);
  } else if (type == "ByteFallback") {
    spec->byte_fallback = true;
  } else if (type == "Fuse") {
    *fused = true;
  } else if (type == "Strip") {
    uint64_t start = 0, stop = 0;
    std::string_view content;
    if (!*fused || o["start"].get(start) != simdjson::SUCCESS ||
        o["stop"].get(stop) != simdjson::SUCCESS || stop != 0 ||
        o["content"].get(content) != simdjson::SUCCESS) {
      return absl::UnimplementedError(fmt::format(
          "{}: Strip is supported after Fuse, with a \"content\" and \"stop\": 0 only", path));
    }
    spec->strip_start = start;
    spec->strip_content = std::string(content);
  } else {
    return Unsupported(path, type);
  }
  return absl::OkStatus();
}

absl::Status ParseDecoder(const element& e, std::string_view path, DecoderSpec* spec) {
  object o;
  if (e.get(o) != simdjson::SUCCESS) return Unsupported(path, "null");
  KVTIER_ASSIGN_OR_RETURN(std::string_view type, Str(o, "type", path));
  bool fused = false;
  if (type != "Sequence") return ParseDecoderStep(o, type, path, &fused, spec);
  array items;
  if (o["decoders"].get(items) != simdjson::SUCCESS) {
    return Bad(path, "\"decoders\" must be a list");
  }
  size_t i = 0;
  for (element item : items) {
    const std::string item_path = fmt::format("{}.decoders[{}]", path, i++);
    object step;
    if (item.get(step) != simdjson::SUCCESS) return Bad(item_path, "must be an object");
    KVTIER_ASSIGN_OR_RETURN(std::string_view step_type, Str(step, "type", item_path));
    KVTIER_RETURN_IF_ERROR(ParseDecoderStep(step, step_type, item_path, &fused, spec));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerSpec> ParseTokenizerJson(std::string_view json, std::string_view origin) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(json);
  element doc;
  if (auto error = parser.parse(padded).get(doc); error != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not valid JSON: {}", origin, simdjson::error_message(error)));
  }
  TokenizerSpec spec;
  auto parse = [&]() -> absl::Status {
    element model, e;
    if (doc["model"].get(model) != simdjson::SUCCESS) return Bad("model", "is missing");
    KVTIER_RETURN_IF_ERROR(ParseModel(model, &spec.model));
    if (doc["normalizer"].get(e) == simdjson::SUCCESS) {
      KVTIER_RETURN_IF_ERROR(ParseNormalizer(e, "normalizer", &spec.normalizer));
    }
    if (doc["pre_tokenizer"].get(e) == simdjson::SUCCESS) {
      KVTIER_RETURN_IF_ERROR(ParsePreTokenizer(e, "pre_tokenizer", &spec.pre_tokenizer));
    }
    for (const PreTokenizerStep& s : spec.pre_tokenizer) {
      spec.model.byte_level |= s.kind == PreTokenizerStep::Kind::kByteLevel;
    }
    if (doc["added_tokens"].get(e) == simdjson::SUCCESS) {
      KVTIER_RETURN_IF_ERROR(ParseAddedTokens(e, &spec.added_tokens));
    }
    if (doc["post_processor"].get(e) == simdjson::SUCCESS) {
      KVTIER_RETURN_IF_ERROR(ParsePostProcessor(e, "post_processor", &spec));
    }
    if (doc["decoder"].get(e) != simdjson::SUCCESS) return Bad("decoder", "is missing");
    KVTIER_RETURN_IF_ERROR(ParseDecoder(e, "decoder", &spec.decoder));
    // Byte-level vocabularies spell bytes; others spell text and need ByteFallback for bytes.
    if (spec.model.byte_level != spec.decoder.byte_level ||
        (spec.decoder.byte_level &&
         (spec.decoder.byte_fallback || !spec.decoder.replacements.empty()))) {
      return absl::UnimplementedError(
          "decoder: ByteLevel decoding goes with a ByteLevel pre-tokenizer, and only with it");
    }
    return absl::OkStatus();
  };
  if (absl::Status s = parse(); !s.ok()) {
    return absl::Status(s.code(), fmt::format("{}: {}", origin, std::string(s.message())));
  }
  return spec;
}

}  // namespace kvtier::engine
