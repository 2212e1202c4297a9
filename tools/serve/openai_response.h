// The JSON bodies OpenAI's API returns, for one request (one choice, index 0):
//   non-streaming: {"id", "object": "text_completion" | "chat.completion", "created", "model",
//                   "choices": [{"index", "text" | "message": {"role", "content"},
//                                "logprobs": null, "finish_reason"}], "usage"}
//   streaming:     the same with "object": "text_completion" | "chat.completion.chunk" and
//                  "text" | "delta" in each chunk; the chat stream's first delta carries the role;
//                  the last content chunk carries finish_reason; with include_usage a final chunk
//                  has "choices": [] and the usage (and every other chunk "usage": null).
// usage: {"prompt_tokens", "completion_tokens", "total_tokens",
//         "prompt_tokens_details": {"cached_tokens", "kvtier_cached_from"}}; kvtier_cached_from
// (an extension: clients ignore unknown fields) splits cached_tokens by where the cache held them:
// {"engine": this server's own pool, "t0", "t1", "t2", "t3": kvtierd's tiers}. usage also has
// "kvtier_preemptions" (an extension too): how many times the engine preempted the request.
// Every body is dumped with invalid UTF-8 replaced, so a response is always valid JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tools/serve/api_request.h"
#include "tools/serve/request_channel.h"

namespace kvtier::serve {

// What every body of one response shares.
struct ResponseHead {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool include_usage = false;  // streaming: chunks carry "usage": null, then a usage chunk
};

// The whole response of a non-streaming request.
std::string CompletionBody(const ResponseHead& head, const std::string& text,
                           const Completion& completion);

// One streamed chunk: `text` (possibly empty), the role for the chat stream's first chunk, the
// finish_reason on the last. Returned as an SSE event: "data: {...}\n\n".
std::string ChunkEvent(const ResponseHead& head, const std::string& text, bool first,
                       const std::optional<std::string>& finish_reason);
// The usage chunk (include_usage), as an SSE event.
std::string UsageEvent(const ResponseHead& head, const Completion& completion);
// An error inside a stream whose headers went out already, as an SSE event.
std::string ErrorEvent(const std::string& error_body);
inline constexpr const char* kDoneEvent = "data: [DONE]\n\n";

// GET /v1/models: the model, its context (max_model_len) and vocabulary size (what a client
// making token-id prompts stays within).
std::string ModelsBody(const std::string& model, int64_t created, int64_t max_model_len,
                       int64_t vocab_size);

}  // namespace kvtier::serve
