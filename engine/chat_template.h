// A model's chat template (the Jinja text in tokenizer_config.json or chat_template.jinja),
// rendered as transformers' apply_chat_template(messages, tokenize=False, ...) renders it: the
// template sees `messages`, `tools` (None when absent), `documents` (None),
// `add_generation_prompt`, the special tokens' texts (bos_token, eos_token, pad_token, unk_token:
// those the config names) and any extra variables (such as Qwen3's `enable_thinking`).
// engine/jinja_parser.h lists the Jinja subset supported; a template outside it fails at Create,
// naming the line.
//
// Thread-safety: Render is const and may run concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/jinja_ast.h"
#include "engine/tokenizer.h"
#include "nlohmann/json.hpp"

namespace kvtier::engine {

struct ChatOptions {
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // passed to the template only when set
  nlohmann::ordered_json tools;         // a list of tool schemas; null: none
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more template variables
};

class ChatTemplate {
 public:
  // Parses `source`. `special` supplies the special tokens' texts.
  static absl::StatusOr<ChatTemplate> Create(std::string_view source, const SpecialTokens& special);
  // The tokenizer's own template; NotFound when its directory has none.
  static absl::StatusOr<ChatTemplate> FromTokenizer(const Tokenizer& tokenizer);

  // `messages` is a list of {"role": ..., "content": ..., ...} objects, passed as they are (keys
  // in order: tojson keeps it). A template's raise_exception() comes back as InvalidArgument with
  // its message.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages,
                                     const ChatOptions& options) const;

 private:
  ChatTemplate(std::shared_ptr<const std::vector<jinja::Stmt>> program, jinja::Object specials)
      : program_(std::move(program)), specials_(std::move(specials)) {}

  std::shared_ptr<const std::vector<jinja::Stmt>> program_;
  jinja::Object specials_;
};

}  // namespace kvtier::engine
