#include "tools/serve/engine_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "common/log.h"

namespace kvtier::serve {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

EngineWorker::EngineWorker(std::unique_ptr<engine::LlmEngine> engine,
                           const engine::Tokenizer& tokenizer, ServeMetrics& metrics)
    : engine_(std::move(engine)), tokenizer_(tokenizer), metrics_(metrics) {
  thread_ = std::thread([this] { Loop(); });
}

EngineWorker::~EngineWorker() { Stop(); }

void EngineWorker::Submit(Job job) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      arrivals_.push_back({std::move(job), Clock::now()});
      cv_.Signal();
      return;
    }
  }
  job.channel->Cancelled();
}

void EngineWorker::Cancel(const std::shared_ptr<RequestChannel>& channel) {
  absl::MutexLock lock(&mu_);
  cancels_.push_back(channel);
  cv_.Signal();
}

void EngineWorker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.Signal();
  }
  if (thread_.joinable()) thread_.join();
}

void EngineWorker::Loop() {
  std::vector<Arrival> arrivals;
  std::vector<std::shared_ptr<RequestChannel>> cancels;
  while (WaitForWork(arrivals, cancels)) {
    for (Arrival& a : arrivals) Admit(std::move(a));
    for (const auto& c : cancels) CancelRequest(c);
    arrivals.clear();
    cancels.clear();
    StepOnce();
  }
  for (Arrival& a : arrivals) a.job.channel->Cancelled();
  CancelAllActive();
}

bool EngineWorker::WaitForWork(std::vector<Arrival>& arrivals,
                               std::vector<std::shared_ptr<RequestChannel>>& cancels) {
  // Busy while the engine has requests (a cancelled one still has to come out of a step).
  const bool busy = !engine_->idle() || !active_.empty();
  absl::MutexLock lock(&mu_);
  while (!busy && !stopping_ && arrivals_.empty() && cancels_.empty()) cv_.Wait(&mu_);
  arrivals.swap(arrivals_);
  cancels.swap(cancels_);
  if (stopping_) {
    for (Arrival& a : arrivals_) arrivals.push_back(std::move(a));
    arrivals_.clear();
  }
  return !stopping_;
}

void EngineWorker::Admit(Arrival arrival) {
  Job& job = arrival.job;
  absl::StatusOr<uint64_t> id = engine_->Add(std::move(job.prompt), job.options);
  if (!id.ok()) {
    job.channel->Fail(id.status());
    return;
  }
  by_channel_[job.channel.get()] = *id;
  active_.emplace(*id, Active{.channel = job.channel,
                              .decoder = engine::StreamDecoder(tokenizer_,
                                                               /*skip_special_tokens=*/true),
                              .stop = StopMatcher(std::move(job.stop)),
                              .arrival = arrival.at,
                              .last_token = arrival.at});
  job.channel->Accept();
}

void EngineWorker::CancelRequest(const std::shared_ptr<RequestChannel>& channel) {
  const auto it = by_channel_.find(channel.get());
  if (it != by_channel_.end()) engine_->Cancel(it->second);
}

void EngineWorker::StepOnce() {
  absl::StatusOr<engine::StepOutput> out = engine_->Step();
  if (!out.ok()) {
    KVTIER_LOG(kError, "serve", "engine step failed: {}", std::string(out.status().message()));
    FailAll(out.status());
    return;
  }
  // The queues before the tokens go out: a client that saw its first token finds itself running.
  metrics_.SetQueues(engine_->scheduler().num_running(), engine_->scheduler().num_waiting());
  for (const engine::StepOutput::Token& t : out->tokens) OnToken(t.id, t.token);
  for (const engine::RequestOutput& r : out->finished) OnFinished(r);
  ServeMetrics::StepTimes times{.schedule_ms = out->times.schedule_ms,
                                .forward_ms = out->times.forward_ms,
                                .update_ms = out->times.update_ms,
                                .waited = out->waiting_for_room,
                                .held = out->admission_held};
  // kvtierd's tier had no room for anything this step (--daemon): let it evict, then step again.
  if (out->waiting_for_room) {
    const auto before = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    times.room_wait_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before)
            .count();
  }
  metrics_.OnStep(times);
}

void EngineWorker::OnToken(uint64_t id, int32_t token) {
  const auto it = active_.find(id);
  if (it == active_.end() || it->second.stopped) return;
  Active& a = it->second;
  const Clock::time_point now = Clock::now();
  if (a.tokens == 0) {
    metrics_.ObserveTimeToFirstToken(Seconds(now - a.arrival));
  } else {
    metrics_.ObserveInterTokenLatency(Seconds(now - a.last_token));
  }
  a.last_token = now;
  ++a.tokens;
  a.channel->Append(a.stop.Push(a.decoder.Push(token)));
  if (a.stop.stopped()) {
    a.stopped = true;
    engine_->Cancel(id);
  }
}

void EngineWorker::OnFinished(const engine::RequestOutput& out) {
  const auto it = active_.find(out.id);
  if (it == active_.end()) return;
  Active a = std::move(it->second);
  active_.erase(it);
  by_channel_.erase(a.channel.get());
  const int64_t cached = out.prompt_cached_tokens;
  const RequestTokens tokens{.prompt = out.prompt_tokens,
                             .cached_from = out.prompt_cached_from,
                             .completion = a.tokens,
                             .preemptions = out.preemptions};
  if (out.finish_reason == engine::FinishReason::kCancelled && !a.stopped) {
    metrics_.OnRequestDone(Outcome::kCancelled, tokens);
    a.channel->Cancelled();
    return;
  }
  if (!a.stopped) a.channel->Append(a.stop.Push(a.decoder.Finish()));
  if (!a.stopped) a.channel->Append(a.stop.Flush());
  const bool stop =
      a.stopped || a.stop.stopped() || out.finish_reason == engine::FinishReason::kStop;
  metrics_.OnRequestDone(stop ? Outcome::kStop : Outcome::kLength, tokens);
  a.channel->Finish({.finish_reason = stop ? "stop" : "length",
                     .prompt_tokens = out.prompt_tokens,
                     .completion_tokens = a.tokens,
                     .cached_tokens = cached,
                     .cached_from = out.prompt_cached_from,
                     .preemptions = out.preemptions});
}

void EngineWorker::FailAll(const absl::Status& status) {
  for (auto& [id, a] : active_) {
    engine_->Cancel(id);
    metrics_.OnRequestDone(Outcome::kFailed, RequestTokens{.completion = a.tokens});
    a.channel->Fail(
        absl::InternalError(fmt::format("the engine failed: {}", std::string(status.message()))));
  }
  active_.clear();
  by_channel_.clear();
  (void)engine_->Step();  // collects the cancelled sequences
}

void EngineWorker::CancelAllActive() {
  for (auto& [id, a] : active_) {
    engine_->Cancel(id);
    a.channel->Cancelled();
  }
  active_.clear();
  by_channel_.clear();
}

}  // namespace kvtier::serve
