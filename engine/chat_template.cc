#include "engine/chat_template.h"

#include "engine/jinja_interpreter.h"
#include "engine/jinja_parser.h"
#include "fmt/format.h"

namespace kvtier::engine {

absl::StatusOr<ChatTemplate> ChatTemplate::Create(std::string_view source,
                                                  const SpecialTokens& special) {
  KVTIER_ASSIGN_OR_RETURN(std::vector<jinja::Stmt> program, jinja::Parse(source));
  jinja::Object specials;
  for (const auto& [name, text] :
       {std::pair{"bos_token", &special.bos_token}, std::pair{"eos_token", &special.eos_token},
        std::pair{"pad_token", &special.pad_token}, std::pair{"unk_token", &special.unk_token}}) {
    if (!text->empty()) specials.emplace_back(name, jinja::Value(*text));
  }
  return ChatTemplate(std::make_shared<const std::vector<jinja::Stmt>>(std::move(program)),
                      std::move(specials));
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizer(const Tokenizer& tokenizer) {
  if (tokenizer.config().chat_template.empty()) {
    return absl::NotFoundError(
        "the tokenizer has no chat template (tokenizer_config.json \"chat_template\")");
  }
  return Create(tokenizer.config().chat_template, tokenizer.special_tokens());
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                                 const ChatOptions& options) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("chat messages must be a list");
  jinja::Object vars = specials_;
  for (const auto& [k, v] : options.extra.items()) vars.emplace_back(k, jinja::Value::FromJson(v));
  vars.emplace_back("messages", jinja::Value::FromJson(messages));
  vars.emplace_back("tools", jinja::Value::FromJson(options.tools));
  vars.emplace_back("documents", jinja::Value::None());
  vars.emplace_back("add_generation_prompt", jinja::Value(options.add_generation_prompt));
  if (options.enable_thinking.has_value())
    vars.emplace_back("enable_thinking", jinja::Value(*options.enable_thinking));
  jinja::Interpreter interpreter(vars);
  return interpreter.Render(*program_);
}

}  // namespace kvtier::engine
