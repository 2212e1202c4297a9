#include "tools/serve/serve_metrics.h"

#include <algorithm>
#include <sstream>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace kvtier::serve {
namespace {

constexpr const char* kOutcomeNames[kNumOutcomes] = {"stop", "length", "cancelled", "failed",
                                                     "rejected"};
static_assert(static_cast<size_t>(engine::CacheSource::kEngine) == 0 &&
              static_cast<size_t>(engine::CacheSource::kT0) == 1 &&
              static_cast<size_t>(engine::CacheSource::kT1) == 2 &&
              static_cast<size_t>(engine::CacheSource::kT2) == 3 &&
              static_cast<size_t>(engine::CacheSource::kT3) == 4);

// 1 ms .. ~65 s, doubling: prefill of a long prompt on the CPU backend takes seconds.
prometheus::Histogram::BucketBoundaries TtftBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double s = 0.001; s < 70; s *= 2) b.push_back(s);
  return b;
}

// 0.25 ms .. ~4 s, doubling.
prometheus::Histogram::BucketBoundaries ItlBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double s = 0.00025; s < 5; s *= 2) b.push_back(s);
  return b;
}

}  // namespace

ServeMetrics::ServeMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  ttft_ = &prometheus::BuildHistogram()
               .Name("kvtier_serve_time_to_first_token_seconds")
               .Help("From a request's arrival to its first generated token")
               .Register(r)
               .Add({}, TtftBuckets());
  itl_ = &prometheus::BuildHistogram()
              .Name("kvtier_serve_inter_token_latency_seconds")
              .Help("Between consecutive generated tokens of one request")
              .Register(r)
              .Add({}, ItlBuckets());
  running_ = &prometheus::BuildGauge()
                  .Name("kvtier_serve_requests_running")
                  .Help("Requests in the engine's running batch")
                  .Register(r)
                  .Add({});
  waiting_ = &prometheus::BuildGauge()
                  .Name("kvtier_serve_requests_waiting")
                  .Help("Requests queued for the engine (preempted ones included)")
                  .Register(r)
                  .Add({});
  auto& prompt = prometheus::BuildCounter()
                     .Name("kvtier_serve_prompt_tokens_total")
                     .Help(
                         "Prompt tokens of requests that left the engine, by where their KV "
                         "came from: computed, the engine's private prefix cache (engine), or "
                         "the kvtierd tier it was found in (t0, t1, t2)")
                     .Register(r);
  prompt_computed_ = &prompt.Add({{"source", "computed"}});
  for (size_t i = 0; i < engine::kCacheSources; ++i)
    prompt_cached_[i] = &prompt.Add({{"source", engine::kCacheSourceNames[i]}});
  generation_tokens_ = &prometheus::BuildCounter()
                            .Name("kvtier_serve_generation_tokens_total")
                            .Help("Tokens generated")
                            .Register(r)
                            .Add({});
  preemptions_ = &prometheus::BuildCounter()
                      .Name("kvtier_serve_preemptions_total")
                      .Help("Times a running request was preempted (its KV released)")
                      .Register(r)
                      .Add({});
  auto& outcomes = prometheus::BuildCounter()
                       .Name("kvtier_serve_requests_total")
                       .Help("Generation requests by outcome (rejected: answered with a 4xx)")
                       .Register(r);
  for (int i = 0; i < kNumOutcomes; ++i)
    outcomes_[i] = &outcomes.Add({{"outcome", kOutcomeNames[i]}});
  auto& steps = prometheus::BuildCounter()
                    .Name("kvtier_serve_engine_steps_total")
                    .Help("Engine steps that ran a batch (ran) or found no room and slept (waited)")
                    .Register(r);
  steps_ran_ = &steps.Add({{"kind", "ran"}});
  steps_waited_ = &steps.Add({{"kind", "waited"}});
  auto& held = prometheus::BuildCounter()
                   .Name("kvtier_serve_admission_held_steps_total")
                   .Help(
                       "Engine steps whose first waiting request was not admitted, by why: a "
                       "running request sat out for room or was preempted, no budget or "
                       "max_running left, its prefix loading from a lower tier, its prefix "
                       "waiting for room to load, its first chunk not fitting")
                   .Register(r);
  constexpr const char* kHeld[engine::kAdmissionHeldReasons] = {
      "", "running_wait", "limit", "prefix_loading", "prefix_room", "room"};
  for (size_t i = 1; i < engine::kAdmissionHeldReasons; ++i) {
    held_[i] = &held.Add({{"reason", kHeld[i]}});
  }
  auto& seconds = prometheus::BuildCounter()
                      .Name("kvtier_serve_engine_seconds_total")
                      .Help(
                          "The engine thread's host time by part: scheduling (kvtierd lookups, "
                          "leases), the model's forward, the update (publishing filled blocks), "
                          "and sleeps waiting for room")
                      .Register(r);
  constexpr const char* kParts[4] = {"schedule", "forward", "update", "room_wait"};
  for (int i = 0; i < 4; ++i) step_seconds_[i] = &seconds.Add({{"part", kParts[i]}});
}

ServeMetrics::~ServeMetrics() = default;

void ServeMetrics::ObserveTimeToFirstToken(double seconds) { ttft_->Observe(seconds); }
void ServeMetrics::ObserveInterTokenLatency(double seconds) { itl_->Observe(seconds); }

void ServeMetrics::SetQueues(size_t running, size_t waiting) {
  running_->Set(static_cast<double>(running));
  waiting_->Set(static_cast<double>(waiting));
}

void ServeMetrics::OnRequestDone(Outcome outcome, const RequestTokens& tokens) {
  outcomes_[static_cast<int>(outcome)]->Increment();
  int64_t cached = 0;
  for (size_t i = 0; i < engine::kCacheSources; ++i) {
    // The engine never reports more than the prompt; clamp anyway so the five sum to it.
    const int64_t n = std::clamp<int64_t>(tokens.cached_from[i], 0, tokens.prompt - cached);
    prompt_cached_[i]->Increment(static_cast<double>(n));
    cached += n;
  }
  prompt_computed_->Increment(static_cast<double>(std::max<int64_t>(tokens.prompt - cached, 0)));
  generation_tokens_->Increment(static_cast<double>(tokens.completion));
  preemptions_->Increment(tokens.preemptions);
}

void ServeMetrics::OnStep(const StepTimes& t) {
  (t.waited ? steps_waited_ : steps_ran_)->Increment();
  const auto held = static_cast<size_t>(t.held);
  if (held > 0 && held < held_.size()) held_[held]->Increment();
  const double ms[4] = {t.schedule_ms, t.forward_ms, t.update_ms, t.room_wait_ms};
  for (int i = 0; i < 4; ++i) step_seconds_[i]->Increment(std::max(ms[i], 0.0) / 1000);
}

std::string ServeMetrics::Render() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace kvtier::serve
