// From a parsed OpenAI request to the engine's job: the prompt's token ids (a completion's text
// encoded with the tokenizer's special tokens; a chat rendered through the model's chat template,
// as `kvtier generate --chat` does), checked against the vocabulary and the context, and the
// request options: max_tokens (default 16 for completions, the rest of the context for chat),
// sampling (the request's fields, else the model's generation_config.json as `kvtier generate`
// reads it: greedy unless it says do_sample), the seed (random when absent), stop strings and
// ignore_eos.
#pragma once

#include <optional>

#include "tools/serve/api_error.h"
#include "tools/serve/api_request.h"
#include "tools/serve/engine_worker.h"
#include "tools/serve/serve_context.h"

namespace kvtier::serve {

// Fills *job (but its channel), or returns the 400 that names the field.
std::optional<ApiError> PrepareJob(const ServeContext& ctx, const ApiRequest& request, Job* job);

}  // namespace kvtier::serve
