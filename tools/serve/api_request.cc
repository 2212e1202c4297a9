#include "tools/serve/api_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace kvtier::serve {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxStops = 16;
constexpr size_t kMaxStopBytes = 256;
constexpr int64_t kMaxTokensLimit = int64_t{1} << 24;

// A field's value, or null when absent (null counts as absent).
const Json& Field(const Json& body, const char* name) {
  static const Json kNull;
  const auto it = body.find(name);
  return it == body.end() ? kNull : *it;
}

std::optional<ApiError> Integer(const Json& body, const char* name, int64_t lo, int64_t hi,
                                std::optional<int64_t>* out) {
  const Json& v = Field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number_integer()) return BadRequest(name, fmt::format("'{}' must be an integer", name));
  const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi);
  const int64_t x = too_big ? hi : v.get<int64_t>();
  if (too_big || x < lo || x > hi) {
    return BadRequest(
        name, fmt::format("'{}' must be between {} and {} (got {})", name, lo, hi, v.dump()));
  }
  *out = x;
  return std::nullopt;
}

// A number in [lo, hi] (or (lo, hi] when lo_open).
std::optional<ApiError> Number(const Json& body, const char* name, double lo, bool lo_open,
                               double hi, std::optional<double>* out) {
  const Json& v = Field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) return BadRequest(name, fmt::format("'{}' must be a number", name));
  const double x = v.get<double>();
  if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi) {
    return BadRequest(name, fmt::format("'{}' must be in {}{}, {}] (got {})", name,
                                        lo_open ? "(" : "[", lo, hi, x));
  }
  *out = x;
  return std::nullopt;
}

std::optional<ApiError> Bool(const Json& body, const char* name, bool* out) {
  const Json& v = Field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) return BadRequest(name, fmt::format("'{}' must be a boolean", name));
  *out = v.get<bool>();
  return std::nullopt;
}

// Options this server does not implement: refused unless absent or neutral.
std::optional<ApiError> Unsupported(const Json& body) {
  struct Neutral {
    const char* name;
    Json value;
  };
  // logprobs is an integer in completions and a boolean in chat: 0 and false are both neutral.
  const Neutral kNeutral[] = {{"n", 1},
                              {"best_of", 1},
                              {"echo", false},
                              {"logprobs", false},
                              {"logprobs", 0},
                              {"suffix", ""},
                              {"presence_penalty", 0},
                              {"frequency_penalty", 0},
                              {"repetition_penalty", 1}};
  for (const Neutral& n : kNeutral) {
    const Json& v = Field(body, n.name);
    if (v.is_null() || v == n.value) continue;
    if (n.value.is_number() && v.is_number() && v.get<double>() == n.value.get<double>()) continue;
    if (std::string_view(n.name) == "logprobs" && (v == false || v == 0)) continue;
    return BadRequest(n.name, fmt::format("'{}' is not supported by this server (only {})", n.name,
                                          n.value.dump()));
  }
  for (const char* name : {"top_logprobs", "tools", "tool_choice", "functions", "function_call",
                           "logit_bias", "response_format", "prediction", "audio"}) {
    const Json& v = Field(body, name);
    if (v.is_null() || (v.is_array() && v.empty()) || (v.is_object() && v.empty())) continue;
    if (std::string_view(name) == "tool_choice" && v == "none") continue;
    return BadRequest(name, fmt::format("'{}' is not supported by this server", name));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseStop(const Json& body, std::vector<std::string>* out) {
  const Json& v = Field(body, "stop");
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) {
    out->push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const Json& s : v) {
      if (!s.is_string()) return BadRequest("stop", "'stop' must be a string or a list of strings");
      out->push_back(s.get<std::string>());
    }
  } else {
    return BadRequest("stop", "'stop' must be a string or a list of strings");
  }
  if (out->size() > kMaxStops) {
    return BadRequest("stop",
                      fmt::format("'stop' holds {} strings; at most {}", out->size(), kMaxStops));
  }
  for (const std::string& s : *out) {
    if (s.empty()) return BadRequest("stop", "'stop' strings must not be empty");
    if (s.size() > kMaxStopBytes) {
      return BadRequest("stop", fmt::format("'stop' strings are at most {} bytes", kMaxStopBytes));
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ParsePrompt(const Json& body, ApiRequest* out) {
  const Json* v = &Field(body, "prompt");
  if (v->is_null()) return BadRequest("prompt", "'prompt' is required");
  // A list holding one prompt (a string or a list of token ids) is that prompt.
  if (v->is_array() && v->size() == 1 && ((*v)[0].is_string() || (*v)[0].is_array())) v = &(*v)[0];
  if (v->is_string()) {
    out->prompt = v->get<std::string>();
    if (out->prompt.empty()) return BadRequest("prompt", "'prompt' must not be empty");
    return std::nullopt;
  }
  if (!v->is_array() || v->empty()) {
    return BadRequest("prompt", "'prompt' must be a string or a non-empty list of token ids");
  }
  for (const Json& t : *v) {
    if (t.is_string() || t.is_array()) {
      return BadRequest("prompt", "only one prompt per request is supported");
    }
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return BadRequest("prompt", "'prompt' token ids must be non-negative integers");
    }
    out->prompt_tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  out->prompt_is_tokens = true;
  return std::nullopt;
}

// A message's content as one string: a string, null (""), or a list of text parts.
std::optional<ApiError> FlattenContent(Json& message, size_t index) {
  const std::string param = fmt::format("messages[{}].content", index);
  Json& content = message["content"];
  if (content.is_null() || content.is_string()) return std::nullopt;
  if (!content.is_array()) return BadRequest(param, "content must be a string or a list of parts");
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object() || Field(part, "type") != "text" || !Field(part, "text").is_string()) {
      return BadRequest(param, "only text content parts ({\"type\": \"text\", \"text\": ...})");
    }
    text += part["text"].get<std::string>();
  }
  content = std::move(text);
  return std::nullopt;
}

std::optional<ApiError> ParseMessages(const Json& body, ApiRequest* out) {
  const Json& v = Field(body, "messages");
  if (!v.is_array() || v.empty()) {
    return BadRequest("messages", "'messages' must be a non-empty list of messages");
  }
  out->messages = v;
  for (size_t i = 0; i < out->messages.size(); ++i) {
    Json& m = out->messages[i];
    if (!m.is_object()) return BadRequest(fmt::format("messages[{}]", i), "a message is an object");
    if (!Field(m, "role").is_string()) {
      return BadRequest(fmt::format("messages[{}].role", i), "'role' must be a string");
    }
    if (auto e = FlattenContent(m, i)) return e;
  }
  const Json& kwargs = Field(body, "chat_template_kwargs");
  if (!kwargs.is_null() && !kwargs.is_object()) {
    return BadRequest("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  }
  if (kwargs.is_object()) out->chat_template_kwargs = kwargs;
  return std::nullopt;
}

std::optional<ApiError> ParseSampling(const Json& body, ApiRequest* out) {
  if (auto e = Number(body, "temperature", 0, false, 100, &out->temperature)) return e;
  if (auto e = Number(body, "top_p", 0, true, 1, &out->top_p)) return e;
  if (auto e = Integer(body, "top_k", -1, std::numeric_limits<int32_t>::max(), &out->top_k))
    return e;
  if (auto e = Integer(body, "seed", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max(), &out->seed)) {
    return e;
  }
  const char* max_name =
      !Field(body, "max_completion_tokens").is_null() ? "max_completion_tokens" : "max_tokens";
  return Integer(body, max_name, 1, kMaxTokensLimit, &out->max_tokens);
}

std::optional<ApiError> ParseStream(const Json& body, ApiRequest* out) {
  if (auto e = Bool(body, "stream", &out->stream)) return e;
  const Json& options = Field(body, "stream_options");
  if (options.is_null()) return std::nullopt;
  if (!options.is_object())
    return BadRequest("stream_options", "'stream_options' must be an object");
  if (!out->stream) {
    return BadRequest("stream_options", "'stream_options' is only allowed when 'stream' is true");
  }
  return Bool(options, "include_usage", &out->include_usage);
}

// The deepest nesting of arrays and objects in `body` (outside strings), so that a hostile body
// of a million '[' is refused before any parser or template recursion sees it.
int MaxDepth(std::string_view body) {
  int depth = 0, most = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      most = std::max(most, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return most;
}

constexpr int kMaxDepth = 32;

}  // namespace

std::optional<ApiError> ParseApiRequest(Endpoint endpoint, std::string_view body, ApiRequest* out) {
  if (MaxDepth(body) > kMaxDepth) {
    return BadRequest("", fmt::format("the request body nests deeper than {} levels", kMaxDepth));
  }
  const Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return BadRequest("", "the request body is not valid JSON");
  if (!json.is_object()) return BadRequest("", "the request body must be a JSON object");
  out->endpoint = endpoint;
  const Json& model = Field(json, "model");
  if (!model.is_string()) return BadRequest("model", "'model' must be a string");
  out->model = model.get<std::string>();
  if (auto e =
          endpoint == Endpoint::kCompletions ? ParsePrompt(json, out) : ParseMessages(json, out)) {
    return e;
  }
  if (auto e = ParseSampling(json, out)) return e;
  if (auto e = ParseStop(json, &out->stop)) return e;
  if (auto e = ParseStream(json, out)) return e;
  if (auto e = Bool(json, "ignore_eos", &out->ignore_eos)) return e;
  return Unsupported(json);
}

}  // namespace kvtier::serve
