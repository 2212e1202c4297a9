// `kvtier serve`'s Prometheus metrics (GET /metrics), on prometheus-cpp's registry and text
// serializer as the daemon's are (daemon/metrics.cc); served by the server's own HTTP endpoint, so
// no second listener. Families (docs/engine.md "Serving"):
//   kvtier_serve_time_to_first_token_seconds   histogram: request arrival to its first token
//   kvtier_serve_inter_token_latency_seconds   histogram: between a request's consecutive tokens
//   kvtier_serve_requests_running / _waiting   gauges: the scheduler's queues after each step
//   kvtier_serve_prompt_tokens_total{source="computed"|"engine"|"t0"|"t1"|"t2"|"t3"}
//       prompt tokens of requests that left the engine, by where their KV came from at the first
//       admission: run through the model, the engine's private prefix cache, or the kvtierd tier
//       the lookup found the block in (--daemon); the five add up to the prompt tokens
//   kvtier_serve_generation_tokens_total
//   kvtier_serve_preemptions_total              times a running request was preempted
//   kvtier_serve_requests_total{outcome="stop"|"length"|"cancelled"|"failed"|"rejected"}
//   kvtier_serve_engine_steps_total{kind="ran"|"waited"}
//       engine steps that ran a batch, and steps that found no room (kvtierd's tier was full or
//       the next prefix was still being promoted) and slept before the next
//   kvtier_serve_admission_held_steps_total{reason="running_wait"|"limit"|"prefix_loading"|
//                                                  "prefix_room"|"room"}
//       engine steps whose first waiting request was not admitted, by why: a running request sat
//       out for room or was preempted (nothing is admitted then), no token budget or max_running
//       left, its prefix still on its way from a lower tier (others may pass it), its prefix
//       waiting for room to load, or its first chunk not fitting
//   kvtier_serve_engine_seconds_total{part="schedule"|"forward"|"update"|"room_wait"}
//       the engine thread's host time by part (engine::StepOutput::Times, and the sleeps of the
//       waited steps): where a serving run's time went, e.g. kvtierd's per-step IPC (schedule,
//       update) against the model (forward)
//
// Thread-safety: every method may be called from any thread (prometheus-cpp's metrics are atomic).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/scheduler.h"
#include "engine/sequence.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace kvtier::serve {

enum class Outcome { kStop, kLength, kCancelled, kFailed, kRejected };
inline constexpr int kNumOutcomes = 5;

// What a request that left the engine came to.
struct RequestTokens {
  int64_t prompt = 0;
  // Prompt tokens whose KV the cache gave at the first admission, by engine::CacheSource
  // (RequestOutput::prompt_cached_from); the rest of the prompt was computed.
  engine::CachedBySource cached_from{};
  int64_t completion = 0;
  int32_t preemptions = 0;
};

class ServeMetrics {
 public:
  ServeMetrics();
  ~ServeMetrics();

  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);
  void SetQueues(size_t running, size_t waiting);
  // A request left the engine (or was refused before reaching it: kRejected, no tokens).
  void OnRequestDone(Outcome outcome, const RequestTokens& tokens);
  // One engine step: its parts' host times in ms, whether it waited for room, and how long the
  // worker then slept (ms).
  struct StepTimes {
    double schedule_ms = 0, forward_ms = 0, update_ms = 0, room_wait_ms = 0;
    bool waited = false;
    engine::AdmissionHeld held = engine::AdmissionHeld::kNone;
  };
  void OnStep(const StepTimes& times);

  // The text exposition format.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Counter* prompt_computed_;
  prometheus::Counter* prompt_cached_[engine::kCacheSources];  // by engine::CacheSource
  prometheus::Counter* generation_tokens_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* outcomes_[kNumOutcomes];
  prometheus::Counter* steps_ran_;
  prometheus::Counter* steps_waited_;
  // By engine::AdmissionHeld (kNone's entry unused).
  std::array<prometheus::Counter*, engine::kAdmissionHeldReasons> held_{};
  prometheus::Counter* step_seconds_[4];  // schedule, forward, update, room_wait
};

}  // namespace kvtier::serve
