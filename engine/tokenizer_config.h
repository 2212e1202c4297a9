// What a model directory says about its tokenizer beyond tokenizer.json: the special tokens'
// texts (tokenizer_config.json: bos_token, eos_token, pad_token, unk_token, each a string, null,
// or an {"content": ...} object), the chat template (chat_template.jinja if present, else
// tokenizer_config.json's "chat_template": a string, or a list of named templates of which
// "default" is used), and generation_config.json's bos/eos/pad ids (eos may be a list).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::engine {

struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::string chat_template;  // empty when the directory has none
  // From generation_config.json, when present.
  std::optional<uint32_t> bos_token_id, pad_token_id;
  std::vector<uint32_t> eos_token_ids;
};

// Reads `dir`/tokenizer_config.json (required) and `dir`/generation_config.json and
// `dir`/chat_template.jinja (optional). Errors name the file and the key.
absl::StatusOr<TokenizerConfig> LoadTokenizerConfig(const std::filesystem::path& dir);

// The whole content of `path`, or an error naming it.
absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path);

}  // namespace kvtier::engine
