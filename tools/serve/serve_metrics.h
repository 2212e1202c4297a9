// `kvtier serve`'s Prometheus metrics (GET /metrics), on prometheus-cpp's registry and text
// serializer as the daemon's are (daemon/metrics.cc); served by the server's own HTTP endpoint, so
// no second listener. Families (docs/engine.md "Serving"):
//   kvtier_serve_time_to_first_token_seconds   histogram: request arrival to its first token
//   kvtier_serve_inter_token_latency_seconds   histogram: between a request's consecutive tokens
//   kvtier_serve_requests_running / _waiting   gauges: the scheduler's queues after each step
//   kvtier_serve_prompt_tokens_total{source="prefix_cache"|"computed"}
//   kvtier_serve_generation_tokens_total
//   kvtier_serve_preemptions_total
//   kvtier_serve_requests_total{outcome="stop"|"length"|"cancelled"|"failed"|"rejected"}
//
// Thread-safety: every method may be called from any thread (prometheus-cpp's metrics are atomic).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace kvtier::serve {

enum class Outcome { kStop, kLength, kCancelled, kFailed, kRejected };
inline constexpr int kNumOutcomes = 5;

class ServeMetrics {
 public:
  ServeMetrics();
  ~ServeMetrics();

  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);
  void SetQueues(size_t running, size_t waiting);
  // A request left the engine (or was refused before reaching it: kRejected, zeros).
  void OnRequestDone(Outcome outcome, int64_t prompt_tokens, int64_t cached_tokens,
                     int64_t completion_tokens, int32_t preemptions);

  // The text exposition format.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Counter* prompt_cached_;
  prometheus::Counter* prompt_computed_;
  prometheus::Counter* generation_tokens_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* outcomes_[kNumOutcomes];
};

}  // namespace kvtier::serve
