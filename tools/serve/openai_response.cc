#include "tools/serve/openai_response.h"

#include <nlohmann/json.hpp>

#include "engine/sequence.h"

namespace kvtier::serve {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string Event(const Json& j) { return "data: " + Dump(j) + "\n\n"; }

Json Usage(const Completion& c) {
  Json from = Json::object();
  for (size_t i = 0; i < engine::kCacheSources; ++i)
    from[engine::kCacheSourceNames[i]] = c.cached_from[i];
  return {
      {"prompt_tokens", c.prompt_tokens},
      {"completion_tokens", c.completion_tokens},
      {"total_tokens", c.prompt_tokens + c.completion_tokens},
      {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}, {"kvtier_cached_from", from}}},
      {"kvtier_preemptions", c.preemptions}};
}

bool Chat(const ResponseHead& head) { return head.endpoint == Endpoint::kChatCompletions; }

Json Head(const ResponseHead& head, bool chunk) {
  const char* object = !Chat(head) ? "text_completion"
                       : chunk     ? "chat.completion.chunk"
                                   : "chat.completion";
  return {{"id", head.id}, {"object", object}, {"created", head.created}, {"model", head.model}};
}

Json FinishReason(const std::optional<std::string>& reason) {
  return reason.has_value() ? Json(*reason) : Json(nullptr);
}

}  // namespace

std::string CompletionBody(const ResponseHead& head, const std::string& text,
                           const Completion& completion) {
  Json choice = {{"index", 0}};
  if (Chat(head)) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = completion.finish_reason;
  Json body = Head(head, /*chunk=*/false);
  body["choices"] = Json::array({choice});
  body["usage"] = Usage(completion);
  return Dump(body);
}

std::string ChunkEvent(const ResponseHead& head, const std::string& text, bool first,
                       const std::optional<std::string>& finish_reason) {
  Json choice = {{"index", 0}};
  if (Chat(head)) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (first || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = FinishReason(finish_reason);
  Json body = Head(head, /*chunk=*/true);
  body["choices"] = Json::array({choice});
  if (head.include_usage) body["usage"] = nullptr;
  return Event(body);
}

std::string UsageEvent(const ResponseHead& head, const Completion& completion) {
  Json body = Head(head, /*chunk=*/true);
  body["choices"] = Json::array();
  body["usage"] = Usage(completion);
  return Event(body);
}

std::string ErrorEvent(const std::string& error_body) { return "data: " + error_body + "\n\n"; }

std::string ModelsBody(const std::string& model, int64_t created, int64_t max_model_len,
                       int64_t vocab_size) {
  const Json entry = {{"id", model},
                      {"object", "model"},
                      {"created", created},
                      {"owned_by", "kvtier"},
                      {"max_model_len", max_model_len},
                      {"vocab_size", vocab_size}};
  return Dump(Json{{"object", "list"}, {"data", Json::array({entry})}});
}

}  // namespace kvtier::serve
