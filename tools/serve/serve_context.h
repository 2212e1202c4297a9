// What every HTTP session of `kvtier serve` shares: the served model's name and limits, the
// tokenizer and chat template (const, safe to use concurrently), the engine worker, the metrics,
// and the count of generation requests in flight (for --max-concurrent).
//
// Thread-safety: the fields are set before the server starts and read-only after, but for the
// atomics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/chat_template.h"
#include "engine/model_config.h"
#include "engine/tokenizer.h"
#include "tools/serve/engine_worker.h"
#include "tools/serve/serve_metrics.h"

namespace kvtier::serve {

struct ServeContext {
  std::string model_name;  // what /v1/models lists and requests must name
  const engine::Tokenizer* tokenizer = nullptr;
  std::optional<engine::ChatTemplate> chat_template;  // none: chat requests are refused
  EngineWorker* worker = nullptr;
  ServeMetrics* metrics = nullptr;
  engine::GenerationConfig generation;  // the model's sampling defaults
  uint32_t vocab_size = 0;
  int64_t max_model_len = 0;  // tokens of one sequence at most, prompt and output
  int32_t max_concurrent = 0;
  size_t max_body_bytes = 0;
  int64_t created = 0;  // Unix seconds at start, for /v1/models

  std::atomic<int32_t> in_flight{0};  // generation requests admitted and not yet answered
  std::atomic<bool> draining{false};  // shutting down: new generation requests get 503
  std::atomic<uint64_t> next_id{1};   // response ids
};

}  // namespace kvtier::serve
