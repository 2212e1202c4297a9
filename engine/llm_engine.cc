#include "engine/llm_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "index/namespace.h"

namespace kvtier::engine {
namespace {

constexpr int64_t kDefaultStepTokens = 512;

double MsBetween(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The prefix cache's namespace root: blocks of another model, KV dtype or block size never match.
absl::StatusOr<BlockKey> Root(const ModelBackend& backend) {
  Namespace ns;
  ns.model_id = backend.config().name;
  ns.dtype = backend.kv_dtype();
  ns.block_tokens = static_cast<uint32_t>(backend.block_tokens());
  KVTIER_RETURN_IF_ERROR(ns.Validate());
  return NamespaceRoot(ns);
}

// The scheduler's options for `backend`, checked.
absl::StatusOr<SchedulerOptions> SchedulerOptionsFor(const ModelBackend& backend,
                                                     const EngineOptions& options) {
  const ModelConfig& config = backend.config();
  SchedulerOptions s;
  s.max_running = options.max_running;
  s.room_patience_steps = options.room_patience_steps;
  s.max_step_tokens = options.max_step_tokens > 0
                          ? options.max_step_tokens
                          : std::min<int64_t>(kDefaultStepTokens, backend.max_step_tokens());
  s.max_model_len =
      options.max_model_len > 0 ? options.max_model_len : config.max_position_embeddings;
  for (uint32_t id : config.generation.eos_token_ids) {
    s.eos_token_ids.push_back(static_cast<int32_t>(id));
  }
  KVTIER_RETURN_IF_ERROR(s.Validate());
  if (s.max_model_len > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        fmt::format("engine: max_model_len {} is past the context of {} ({} tokens)",
                    s.max_model_len, config.name, config.max_position_embeddings));
  }
  if (s.max_step_tokens > backend.max_step_tokens()) {
    return absl::InvalidArgumentError(
        fmt::format("engine: max_step_tokens {} is more than the backend holds ({})",
                    s.max_step_tokens, backend.max_step_tokens()));
  }
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlmEngine>> LlmEngine::Create(std::unique_ptr<ModelBackend> backend,
                                                             const EngineOptions& options) {
  KVTIER_ASSIGN_OR_RETURN(const BlockKey root, Root(*backend));
  auto blocks = std::make_unique<BlockManager>(backend->num_slots(), backend->block_tokens(), root,
                                               options.prefix_caching);
  return Create(std::move(backend), std::move(blocks), options);
}

absl::StatusOr<std::unique_ptr<LlmEngine>> LlmEngine::Create(std::unique_ptr<ModelBackend> backend,
                                                             std::unique_ptr<KvBlocks> blocks,
                                                             const EngineOptions& options) {
  KVTIER_ASSIGN_OR_RETURN(SchedulerOptions s, SchedulerOptionsFor(*backend, options));
  if (blocks->block_tokens() != backend->block_tokens() ||
      blocks->num_slots() != backend->num_slots()) {
    return absl::InvalidArgumentError(fmt::format(
        "engine: the KV blocks ({} slots of {} tokens) are not the backend's pool ({} of {})",
        blocks->num_slots(), blocks->block_tokens(), backend->num_slots(),
        backend->block_tokens()));
  }
  auto scheduler = std::make_unique<Scheduler>(std::move(s), *blocks);
  return std::unique_ptr<LlmEngine>(
      new LlmEngine(std::move(backend), std::move(blocks), std::move(scheduler)));
}

LlmEngine::LlmEngine(std::unique_ptr<ModelBackend> backend, std::unique_ptr<KvBlocks> blocks,
                     std::unique_ptr<Scheduler> scheduler)
    : backend_(std::move(backend)), blocks_(std::move(blocks)), scheduler_(std::move(scheduler)) {}

absl::StatusOr<uint64_t> LlmEngine::Add(std::vector<int32_t> prompt,
                                        const RequestOptions& options) {
  const uint32_t vocab = backend_->config().vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || static_cast<uint32_t>(prompt[i]) >= vocab) {
      return absl::InvalidArgumentError(
          fmt::format("request: token {} at index {} is outside the vocabulary ({} tokens)",
                      prompt[i], i, vocab));
    }
  }
  const ops::SamplingParams& p = options.sampling;
  if (!(p.temperature >= 0) || p.top_k < 0 || !(p.top_p > 0 && p.top_p <= 1)) {
    return absl::InvalidArgumentError(fmt::format(
        "request: sampling wants temperature >= 0, top_k >= 0 and 0 < top_p <= 1 (got {}, {}, {})",
        p.temperature, p.top_k, p.top_p));
  }
  const uint64_t id = next_id_;
  KVTIER_RETURN_IF_ERROR(
      scheduler_->Add(std::make_unique<Sequence>(id, std::move(prompt), options)));
  ++next_id_;
  return id;
}

absl::StatusOr<StepOutput> LlmEngine::Step() {
  StepOutput out;
  KVTIER_RETURN_IF_ERROR(blocks_->status());
  const auto t0 = std::chrono::steady_clock::now();
  const StepPlan plan = scheduler_->Schedule();
  const auto t1 = std::chrono::steady_clock::now();
  out.times.schedule_ms = MsBetween(t0, t1);
  out.admission_held = plan.held;
  KVTIER_RETURN_IF_ERROR(blocks_->status());  // a daemon error while scheduling
  if (plan.empty()) {
    if (!scheduler_->idle() && blocks_->MayMakeRoomLater()) {
      out.waiting_for_room = true;
    } else if (!scheduler_->idle()) {
      return absl::InternalError("engine: requests wait but none could be scheduled");
    }
    CollectFinished(out);
    return out;
  }
  std::vector<ChunkInput> batch;
  std::vector<SampleSpec> samples;
  for (const ScheduledChunk& c : plan.chunks) {
    const std::span<const int32_t> tokens(c.seq->tokens());
    batch.push_back({.tokens = tokens.subspan(c.start, c.n),
                     .start = c.start,
                     .block_table = c.seq->block_table()});
    samples.push_back({.wanted = c.samples(),
                       .params = c.seq->options().sampling,
                       .step = static_cast<uint64_t>(c.seq->num_completion_tokens())});
  }
  KVTIER_ASSIGN_OR_RETURN(const std::vector<int32_t> chosen, backend_->Step(batch, samples));
  const auto t2 = std::chrono::steady_clock::now();
  out.times.forward_ms = MsBetween(t1, t2);
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    if (samples[i].wanted) out.tokens.push_back({plan.chunks[i].seq->id(), chosen[i]});
  }
  scheduler_->Update(plan, chosen);
  out.times.update_ms = MsBetween(t2, std::chrono::steady_clock::now());
  CollectFinished(out);
  return out;
}

void LlmEngine::CollectFinished(StepOutput& out) {
  for (std::unique_ptr<Sequence>& seq : scheduler_->TakeFinished()) {
    const std::span<const int32_t> completion = seq->completion();
    out.finished.push_back({.id = seq->id(),
                            .tokens = std::vector<int32_t>(completion.begin(), completion.end()),
                            .finish_reason = seq->finish_reason(),
                            .prompt_tokens = seq->num_prompt_tokens(),
                            .cached_tokens = seq->cached_tokens(),
                            .prompt_cached_tokens = seq->prompt_cached_tokens(),
                            .prompt_cached_from = seq->prompt_cached_from(),
                            .model_tokens = seq->model_tokens(),
                            .preemptions = seq->preemptions()});
  }
}

absl::StatusOr<std::vector<RequestOutput>> LlmEngine::RunUntilIdle() {
  std::vector<RequestOutput> done;
  auto waiting_since = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(100);
  do {
    KVTIER_ASSIGN_OR_RETURN(StepOutput out, Step());
    for (RequestOutput& r : out.finished) done.push_back(std::move(r));
    if (!out.waiting_for_room) {
      waiting_since = std::chrono::steady_clock::now();
      pause = std::chrono::microseconds(100);
      continue;
    }
    if (std::chrono::steady_clock::now() - waiting_since > kRoomWait) {
      return absl::ResourceExhaustedError(fmt::format(
          "engine: {} requests waited {} s for KV slots that never came (the pool's tier is full "
          "of blocks others hold)",
          scheduler_->num_waiting(), kRoomWait.count()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  } while (!scheduler_->idle());
  return done;
}

}  // namespace kvtier::engine
