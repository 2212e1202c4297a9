// The engine thread of `kvtier serve`: it alone owns the LlmEngine and steps it while any request
// waits or runs. HTTP sessions hand it requests and cancellations through a locked queue; it hands
// back each request's text through the request's RequestChannel: every token detokenized as it is
// chosen (engine/stream_decoder.h, special tokens skipped) and cut at the request's stop strings
// (stop_matcher.h; a matched stop string cancels the sequence in the engine at once). It also feeds
// the metrics: time to first token, inter-token latency, queue sizes, outcomes, prompt tokens by
// where their KV came from, preemptions.
//
// Thread-safety: Submit, Cancel and Stop may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/llm_engine.h"
#include "engine/stream_decoder.h"
#include "engine/tokenizer.h"
#include "tools/serve/request_channel.h"
#include "tools/serve/serve_metrics.h"
#include "tools/serve/stop_matcher.h"

namespace kvtier::serve {

// One request for the engine.
struct Job {
  std::vector<int32_t> prompt;
  engine::RequestOptions options;
  std::vector<std::string> stop;  // stop strings (none empty)
  std::shared_ptr<RequestChannel> channel;
};

class EngineWorker {
 public:
  // `tokenizer` and `metrics` must outlive the worker. Starts the engine thread.
  EngineWorker(std::unique_ptr<engine::LlmEngine> engine, const engine::Tokenizer& tokenizer,
               ServeMetrics& metrics);
  // Stop().
  ~EngineWorker();

  // Queues `job`; its channel then gets Accept or Fail, text, and one ending.
  void Submit(Job job);
  // Cancels the request of `channel` (queued or in the engine); its channel gets Cancelled unless
  // it already ended. Unknown channels are ignored.
  void Cancel(const std::shared_ptr<RequestChannel>& channel);
  // Cancels every request (their channels get Cancelled) and joins the thread. Idempotent.
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;
  // A request in the engine (engine thread only).
  struct Active {
    std::shared_ptr<RequestChannel> channel;
    engine::StreamDecoder decoder;
    StopMatcher stop;
    Clock::time_point arrival;
    Clock::time_point last_token;
    int64_t tokens = 0;    // generated so far
    bool stopped = false;  // a stop string matched; the engine reports it cancelled next
  };
  struct Arrival {
    Job job;
    Clock::time_point at;
  };

  void Loop();
  // Takes what the sessions queued; false when stopping.
  bool WaitForWork(std::vector<Arrival>& arrivals,
                   std::vector<std::shared_ptr<RequestChannel>>& cancels) ABSL_LOCKS_EXCLUDED(mu_);
  void Admit(Arrival arrival);
  void CancelRequest(const std::shared_ptr<RequestChannel>& channel);
  void StepOnce();
  void OnToken(uint64_t id, int32_t token);
  void OnFinished(const engine::RequestOutput& out);
  void FailAll(const absl::Status& status);
  void CancelAllActive();

  std::unique_ptr<engine::LlmEngine> engine_;
  const engine::Tokenizer& tokenizer_;
  ServeMetrics& metrics_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<Arrival> arrivals_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<RequestChannel>> cancels_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Engine thread only.
  std::unordered_map<uint64_t, Active> active_;  // by engine request id
  std::unordered_map<const RequestChannel*, uint64_t> by_channel_;

  std::thread thread_;  // last: started after everything above exists
};

}  // namespace kvtier::serve
