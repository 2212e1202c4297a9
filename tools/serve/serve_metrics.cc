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
                     .Help("Prompt tokens of finished requests, by where their KV came from")
                     .Register(r);
  prompt_cached_ = &prompt.Add({{"source", "prefix_cache"}});
  prompt_computed_ = &prompt.Add({{"source", "computed"}});
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
}

ServeMetrics::~ServeMetrics() = default;

void ServeMetrics::ObserveTimeToFirstToken(double seconds) { ttft_->Observe(seconds); }
void ServeMetrics::ObserveInterTokenLatency(double seconds) { itl_->Observe(seconds); }

void ServeMetrics::SetQueues(size_t running, size_t waiting) {
  running_->Set(static_cast<double>(running));
  waiting_->Set(static_cast<double>(waiting));
}

void ServeMetrics::OnRequestDone(Outcome outcome, int64_t prompt_tokens, int64_t cached_tokens,
                                 int64_t completion_tokens, int32_t preemptions) {
  outcomes_[static_cast<int>(outcome)]->Increment();
  // Over several admissions (preemption) the cache may also have held generated tokens.
  const int64_t cached = std::min(cached_tokens, prompt_tokens);
  prompt_cached_->Increment(static_cast<double>(cached));
  prompt_computed_->Increment(static_cast<double>(prompt_tokens - cached));
  generation_tokens_->Increment(static_cast<double>(completion_tokens));
  preemptions_->Increment(preemptions);
}

std::string ServeMetrics::Render() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace kvtier::serve
