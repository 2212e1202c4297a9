// The body of POST /v1/completions and POST /v1/chat/completions, parsed and checked as OpenAI's
// API defines it. Every field is checked for its type and range before anything runs; an error
// names the field (ApiError::param). Unknown fields are ignored, as OpenAI-compatible servers do;
// known options this server does not implement (n > 1, logprobs, tools, penalties, ...) are
// refused when set to anything but their neutral value, so a client never silently gets less than
// it asked for. `null` counts as absent everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/serve/api_error.h"

namespace kvtier::serve {

enum class Endpoint { kCompletions, kChatCompletions };

struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  // Completions: the prompt as text, or as token ids (prompt_is_tokens).
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;
  // Chat: the messages, each content flattened to a string (text parts joined), other keys as
  // given; and chat_template_kwargs (an extension, as vLLM's: extra template variables such as
  // Qwen3's enable_thinking).
  nlohmann::ordered_json messages;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  std::optional<int64_t> max_tokens;  // max_tokens, or max_completion_tokens
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;  // extension; -1 or 0: off
  std::optional<int64_t> seed;
  std::vector<std::string> stop;
  bool ignore_eos = false;  // extension, as vLLM's
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Parses `body` for `endpoint`: the error (400, naming the field), or nullopt with *out filled.
std::optional<ApiError> ParseApiRequest(Endpoint endpoint, std::string_view body, ApiRequest* out);

}  // namespace kvtier::serve
