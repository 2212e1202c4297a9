#include "tools/serve/generation_job.h"

#include <fmt/format.h>

#include <random>
#include <string>
#include <utility>

namespace kvtier::serve {
namespace {

constexpr int32_t kDefaultCompletionTokens = 16;  // OpenAI's default for /v1/completions

const char* PromptParam(const ApiRequest& r) {
  return r.endpoint == Endpoint::kChatCompletions ? "messages" : "prompt";
}

std::optional<ApiError> ChatTokens(const ServeContext& ctx, const ApiRequest& r,
                                   std::vector<int32_t>* out) {
  if (!ctx.chat_template.has_value()) {
    return BadRequest("messages", "this model has no chat template; use /v1/completions");
  }
  engine::ChatOptions options;
  options.extra = r.chat_template_kwargs;
  absl::StatusOr<std::string> text = ctx.chat_template->Render(r.messages, options);
  if (!text.ok()) {
    return BadRequest("messages", fmt::format("the chat template refused the messages: {}",
                                              std::string(text.status().message())));
  }
  absl::StatusOr<std::vector<engine::TokenId>> ids =
      ctx.tokenizer->Encode(*text, /*add_special_tokens=*/false);
  if (!ids.ok()) return BadRequest("messages", std::string(ids.status().message()));
  out->assign(ids->begin(), ids->end());
  return std::nullopt;
}

std::optional<ApiError> PromptTokens(const ServeContext& ctx, const ApiRequest& r,
                                     std::vector<int32_t>* out) {
  if (r.endpoint == Endpoint::kChatCompletions) return ChatTokens(ctx, r, out);
  if (r.prompt_is_tokens) {
    for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
      if (static_cast<uint32_t>(r.prompt_tokens[i]) >= ctx.vocab_size) {
        return BadRequest("prompt", fmt::format("token id {} at index {} is outside the vocabulary "
                                                "({} tokens)",
                                                r.prompt_tokens[i], i, ctx.vocab_size));
      }
    }
    *out = r.prompt_tokens;
    return std::nullopt;
  }
  absl::StatusOr<std::vector<engine::TokenId>> ids =
      ctx.tokenizer->Encode(r.prompt, /*add_special_tokens=*/true);
  if (!ids.ok()) return BadRequest("prompt", std::string(ids.status().message()));
  out->assign(ids->begin(), ids->end());
  return std::nullopt;
}

// Positions 0 .. max_model_len - 1 hold the prompt and every new token but the last.
std::optional<ApiError> MaxTokens(const ServeContext& ctx, const ApiRequest& r, int64_t prompt,
                                  int32_t* out) {
  // prompt + max_tokens <= max_model_len (the engine's limit, and vLLM's): at least one token.
  if (prompt >= ctx.max_model_len) {
    return BadRequest(PromptParam(r),
                      fmt::format("This model's maximum context length is {} tokens. However, "
                                  "your prompt has {} tokens.",
                                  ctx.max_model_len, prompt),
                      "context_length_exceeded");
  }
  const int64_t room = ctx.max_model_len - prompt;
  if (!r.max_tokens.has_value()) {
    *out = static_cast<int32_t>(r.endpoint == Endpoint::kChatCompletions
                                    ? room
                                    : std::min<int64_t>(kDefaultCompletionTokens, room));
    return std::nullopt;
  }
  if (*r.max_tokens > room) {
    return BadRequest("max_tokens",
                      fmt::format("This model's maximum context length is {} tokens. However, you "
                                  "requested {} tokens ({} in the prompt, {} for the completion).",
                                  ctx.max_model_len, prompt + *r.max_tokens, prompt, *r.max_tokens),
                      "context_length_exceeded");
  }
  *out = static_cast<int32_t>(*r.max_tokens);
  return std::nullopt;
}

ops::SamplingParams Sampling(const ServeContext& ctx, const ApiRequest& r) {
  const engine::GenerationConfig& g = ctx.generation;
  const bool model_samples = g.do_sample.value_or(false);
  ops::SamplingParams p;
  p.temperature =
      static_cast<float>(r.temperature.value_or(model_samples ? g.temperature.value_or(1) : 0));
  const int64_t top_k =
      r.top_k.value_or(model_samples ? static_cast<int64_t>(g.top_k.value_or(0)) : 0);
  p.top_k = static_cast<int32_t>(top_k < 0 ? 0 : top_k);
  p.top_p = static_cast<float>(r.top_p.value_or(model_samples ? g.top_p.value_or(1) : 1));
  if (r.seed.has_value()) {
    p.seed = static_cast<uint64_t>(*r.seed);
  } else {
    static thread_local std::mt19937_64 random{std::random_device{}()};
    p.seed = random();
  }
  return p;
}

}  // namespace

std::optional<ApiError> PrepareJob(const ServeContext& ctx, const ApiRequest& request, Job* job) {
  if (auto e = PromptTokens(ctx, request, &job->prompt)) return e;
  if (job->prompt.empty())
    return BadRequest(PromptParam(request), "the prompt encodes to no tokens");
  const auto prompt = static_cast<int64_t>(job->prompt.size());
  if (auto e = MaxTokens(ctx, request, prompt, &job->options.max_tokens)) return e;
  job->options.sampling = Sampling(ctx, request);
  job->options.ignore_eos = request.ignore_eos;
  job->stop = request.stop;
  return std::nullopt;
}

}  // namespace kvtier::serve
