// Splits a Jinja template into tokens as Jinja does under transformers' settings (trim_blocks,
// lstrip_blocks, no trailing newline kept): text between tags, with the whitespace control of
// `{%- -%}`, `{{- -}}` and `{#- -#}` already applied, and the tokens inside tags. Comments vanish.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::engine::jinja {

struct Token {
  enum class Kind {
    kText,
    kExprBegin,
    kExprEnd,
    kStmtBegin,
    kStmtEnd,
    kName,
    kString,
    kInt,
    kFloat,
    kOp,
    kEof
  };
  Kind kind;
  std::string text;  // the text, name, operator, literal's value (decoded) or number's digits
  int line;          // 1-based line in the template, for error messages
};

// An error names the line and what is wrong (an unterminated tag or string, a stray character).
absl::StatusOr<std::vector<Token>> Lex(std::string_view source);

}  // namespace kvtier::engine::jinja
