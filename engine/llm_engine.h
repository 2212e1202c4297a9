// The engine loop (nano-vllm's LLMEngine): requests are added at any time between steps, and each
// step is
//   schedule (scheduler.h) -> one batched forward over every scheduled chunk (model_backend.h)
//   -> choose a token for each sequence that computed its last token -> append, stop, release.
// The prefix cache (block_manager.h) is keyed by the daemon's block keys under a namespace built
// from the model's name, the KV dtype and block_tokens.
//
// Thread-safety: not thread-safe; one thread drives it (a server puts it behind its own queue).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "engine/block_manager.h"
#include "engine/kv_blocks.h"
#include "engine/model_backend.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"

namespace kvtier::engine {

struct EngineOptions {
  int32_t max_running = 64;  // SchedulerOptions'
  // SchedulerOptions'; at most the backend's max_step_tokens(). 0: 512, or the backend's limit
  // when that is less (the GPU model's max_chunk_tokens).
  int64_t max_step_tokens = 0;
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
  bool prefix_caching = true;
  int32_t room_patience_steps = kDefaultRoomPatienceSteps;  // SchedulerOptions'
};

// A finished request.
struct RequestOutput {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // the output, the stop token included
  FinishReason finish_reason = FinishReason::kNone;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;            // taken from the prefix cache (over every admission)
  int64_t prompt_cached_tokens = 0;     // of those, at the first admission (<= prompt_tokens - 1)
  CachedBySource prompt_cached_from{};  // prompt_cached_tokens by source (CacheSource)
  int64_t model_tokens = 0;             // run through the model (recomputation included)
  int32_t preemptions = 0;
};

// What one step produced.
struct StepOutput {
  struct Token {
    uint64_t id;
    int32_t token;
  };
  std::vector<Token> tokens;            // every token chosen in the step, for streaming
  std::vector<RequestOutput> finished;  // requests that finished (or were cancelled) since the
                                        // last step
  // Requests wait, but no slot could be had now and the KV blocks may make room later
  // (KvBlocks::MayMakeRoomLater: the daemon's tier is full), or the next one's prefix is still
  // being promoted into the pool (KvBlocks::kPrefixLoading): step again after a moment.
  bool waiting_for_room = false;
  // Why the first waiting request was not admitted in this step (kNone: it was, or none waited).
  AdmissionHeld admission_held = AdmissionHeld::kNone;
  // Where the step's time went, host clock: scheduling (the KV blocks' lookups, leases and the
  // daemon's promotions for admitted prefixes), the backend's forward and sampling, and the
  // update (committing filled blocks: their checksums and publish). For benchmarks and tracing.
  struct Times {
    double schedule_ms = 0, forward_ms = 0, update_ms = 0;
  } times;
};

class LlmEngine {
 public:
  // InvalidArgument for limits out of range (non-positive, or a step larger than the backend
  // holds, or max_model_len past the model's context).
  static absl::StatusOr<std::unique_ptr<LlmEngine>> Create(std::unique_ptr<ModelBackend> backend,
                                                           const EngineOptions& options);
  // The same over `blocks` instead of a private BlockManager (e.g. DaemonKvBlocks: the backend's
  // pool is then the daemon's tier memory; options.prefix_caching is the daemon's to decide).
  // InvalidArgument, besides the above, when blocks' block_tokens or num_slots differ from the
  // backend's.
  static absl::StatusOr<std::unique_ptr<LlmEngine>> Create(std::unique_ptr<ModelBackend> backend,
                                                           std::unique_ptr<KvBlocks> blocks,
                                                           const EngineOptions& options);

  // Queues a request; returns its id (1, 2, ... in order of arrival). InvalidArgument for a token
  // outside the vocabulary, sampling parameters out of range (temperature < 0, top_k < 0, top_p
  // outside (0, 1]) and whatever Scheduler::Add refuses.
  absl::StatusOr<uint64_t> Add(std::vector<int32_t> prompt, const RequestOptions& options);

  // Cancels a waiting or running request: it comes out of the next Step as kCancelled. False if
  // no unfinished request has that id.
  bool Cancel(uint64_t id) { return scheduler_->Cancel(id); }

  // One step (nothing to do: an empty output). On a backend error the step's sequences have not
  // advanced; the error is returned and the engine may be stepped again.
  absl::StatusOr<StepOutput> Step();

  // Steps until no request waits or runs; the finished requests in order of finishing. Waits a
  // little between steps that wait for room, and gives up (ResourceExhausted) after kRoomWait of
  // nothing but waiting.
  static constexpr std::chrono::seconds kRoomWait{30};
  absl::StatusOr<std::vector<RequestOutput>> RunUntilIdle();

  bool idle() const { return scheduler_->idle(); }
  const Scheduler& scheduler() const { return *scheduler_; }
  const KvBlocks& blocks() const { return *blocks_; }
  ModelBackend& backend() { return *backend_; }

 private:
  LlmEngine(std::unique_ptr<ModelBackend> backend, std::unique_ptr<KvBlocks> blocks,
            std::unique_ptr<Scheduler> scheduler);
  void CollectFinished(StepOutput& out);

  std::unique_ptr<ModelBackend> backend_;
  std::unique_ptr<KvBlocks> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  uint64_t next_id_ = 1;
};

}  // namespace kvtier::engine
