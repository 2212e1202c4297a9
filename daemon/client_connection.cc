#include "daemon/client_connection.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/protocol/spsc_ring.h"
#include "daemon/request_dispatch.h"

namespace kvtier {
namespace internal {

// Completions of requests that finish on other threads (gets), for the worker to post.
struct CompletionQueue {
  explicit CompletionQueue(protocol::EventFd wake_fd) : wake(std::move(wake_fd)) {}
  void Push(const protocol::Completion& completion) {
    {
      absl::MutexLock lock(&mu);
      done.push_back(completion);
      has_done.store(true, std::memory_order_release);
    }
    in_flight.fetch_sub(1, std::memory_order_acq_rel);
    wake.Signal();
  }
  // Moves the queued completions to the back of `out`; true when there were any. Polled every round
  // of the worker's loop, so an empty queue costs one load, not a lock (a lock and unlock per round
  // were a fifth of a polling daemon's time).
  bool TakeAll(std::deque<protocol::Completion>* out) {
    if (!has_done.load(std::memory_order_acquire)) return false;
    absl::MutexLock lock(&mu);
    for (const protocol::Completion& c : done) out->push_back(c);
    done.clear();
    has_done.store(false, std::memory_order_relaxed);
    return true;
  }
  absl::Mutex mu;
  std::deque<protocol::Completion> done ABSL_GUARDED_BY(mu);
  std::atomic<bool> has_done{false};   // !done.empty(); written under mu
  std::atomic<uint32_t> in_flight{0};  // dispatched, completion not yet queued or posted
  const protocol::EventFd wake;
};

}  // namespace internal

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRequestsPerRound = 64;  // then completions are flushed again
constexpr int kIdleSleepMs = 100;      // longest sleep; a stop or a bell wakes it sooner
constexpr int kDrainOnStopMs = 5000;   // how long Stop waits for gets in flight
constexpr int kFullCompletionRingPollMs = 1;

// A worker's hold on one slot of the server's SpinBudget (none: always granted).
class SpinSlot {
 public:
  explicit SpinSlot(SpinBudget* budget) : budget_(budget) {
    if (budget_ != nullptr) budget_->Join();
  }
  ~SpinSlot() {
    Release();
    if (budget_ != nullptr) budget_->Leave();
  }
  SpinSlot(const SpinSlot&) = delete;
  SpinSlot& operator=(const SpinSlot&) = delete;
  void TryAcquire() { held_ = held_ || budget_ == nullptr || budget_->TryAcquire(); }
  void Release() {
    if (held_ && budget_ != nullptr) budget_->Release();
    held_ = false;
  }
  bool held() const { return held_; }

 private:
  SpinBudget* budget_;
  bool held_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ClientConnection>> ClientConnection::Start(
    Service& service, std::shared_ptr<Session> session, std::shared_ptr<protocol::ShmRegion> region,
    protocol::EventFd daemon_bell, protocol::EventFd client_bell,
    const ClientConnectionOptions& options, std::function<void(const std::string&)> on_fatal) {
  KVTIER_ASSIGN_OR_RETURN(protocol::EventFd wake, protocol::EventFd::Create());
  auto queue = std::make_shared<internal::CompletionQueue>(std::move(wake));
  std::unique_ptr<ClientConnection> c(
      new ClientConnection(service, std::move(session), std::move(region), std::move(daemon_bell),
                           std::move(client_bell), options, std::move(queue), std::move(on_fatal)));
  c->worker_ = std::thread([conn = c.get()] { conn->Run(); });
  return c;
}

ClientConnection::ClientConnection(Service& service, std::shared_ptr<Session> session,
                                   std::shared_ptr<protocol::ShmRegion> region,
                                   protocol::EventFd daemon_bell, protocol::EventFd client_bell,
                                   const ClientConnectionOptions& options,
                                   std::shared_ptr<internal::CompletionQueue> queue,
                                   std::function<void(const std::string&)> on_fatal)
    : service_(service),
      session_(std::move(session)),
      region_(std::move(region)),
      daemon_bell_(std::move(daemon_bell)),
      client_bell_(std::move(client_bell)),
      options_(options),
      queue_(std::move(queue)),
      on_fatal_(std::move(on_fatal)) {}

ClientConnection::~ClientConnection() { Stop(); }

void ClientConnection::Stop() {
  stop_.store(true, std::memory_order_release);
  queue_->wake.Signal();
  if (worker_.joinable()) worker_.join();
  const auto deadline = Clock::now() + std::chrono::milliseconds(kDrainOnStopMs);
  while (queue_->in_flight.load(std::memory_order_acquire) != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  service_.Close(*session_);  // gets still in flight release their own leases when they end
}

void ClientConnection::Fail(const std::string& reason) {
  stop_.store(true, std::memory_order_release);
  if (on_fatal_) std::exchange(on_fatal_, nullptr)(reason);
}

void ClientConnection::WaitForCompletionRoom() {
  pollfd fd{queue_->wake.fd(), POLLIN, 0};
  (void)::poll(&fd, 1, kFullCompletionRingPollMs);
  queue_->wake.Drain();
}

void ClientConnection::Run() {
  protocol::RingConsumer requests(region_->submission(), &client_bell_);
  protocol::RingProducer completions(region_->completion(), &client_bell_);
  RequestDispatcher dispatcher(service_, session_, region_->arena());
  const uint32_t arena_bytes = region_->layout().arena_bytes;
  const uint32_t cq_entries = region_->layout().cq_entries;
  const auto spin = std::chrono::microseconds(options_.spin_us);
  std::deque<protocol::Completion> pending;  // completions not yet in the ring, in order
  std::byte record[protocol::kRecordBytes];
  uint64_t idle_rounds = 0;  // rounds without work since the last one with work
  auto idle_since = Clock::now();
  SpinSlot slot(options_.spin_budget.get());
  // Answers owed would fill the completion ring: take no more requests until some are read.
  auto owed_fill_ring = [&] {
    return pending.size() + queue_->in_flight.load(std::memory_order_acquire) >= cq_entries;
  };
  while (!stop_.load(std::memory_order_acquire)) {
    bool progress = queue_->TakeAll(&pending);
    while (!pending.empty()) {
      protocol::EncodeCompletion(pending.front(), record);
      absl::StatusOr<bool> pushed = completions.TryPush(record);
      if (!pushed.ok()) return Fail(std::string(pushed.status().message()));
      if (!*pushed) break;  // full: the client is behind; it was rung if it sleeps
      pending.pop_front();
      progress = true;
    }
    for (int i = 0; i < kRequestsPerRound; ++i) {
      if (owed_fill_ring()) break;
      absl::StatusOr<bool> popped = requests.TryPop(record);
      if (!popped.ok()) return Fail(std::string(popped.status().message()));
      if (!*popped) break;
      progress = true;
      absl::StatusOr<protocol::Request> request =
          protocol::DecodeRequest(absl::MakeConstSpan(record, sizeof(record)), arena_bytes);
      if (!request.ok()) {
        service_.CountInvalidRequest();
        return Fail(std::string(request.status().message()));
      }
      queue_->in_flight.fetch_add(1, std::memory_order_acq_rel);
      absl::StatusOr<std::optional<protocol::Completion>> done = dispatcher.Dispatch(
          *request, [queue = queue_](const protocol::Completion& c) { queue->Push(c); });
      if (!done.ok()) {
        queue_->in_flight.fetch_sub(1, std::memory_order_acq_rel);
        service_.CountInvalidRequest();
        protocol::EncodeCompletion(
            protocol::EmptyCompletion(*request, protocol::RequestStatus::kInvalid), record);
        (void)completions.TryPush(record);  // best effort: the connection closes anyway
        return Fail(std::string(done.status().message()));
      }
      if (done->has_value()) {
        queue_->in_flight.fetch_sub(1, std::memory_order_acq_rel);
        pending.push_back(**done);
      }
    }
    if (progress) {
      idle_rounds = 0;
      slot.Release();
      continue;
    }
    // Poll without reading the clock each round (a clock read cost 13% of a busy daemon's time):
    // the first idle round notes the time, then every 64th looks at it. Only with a spin slot.
    if (idle_rounds++ == 0) {
      idle_since = Clock::now();
      slot.TryAcquire();
    }
    const bool polling = slot.held() && spin.count() > 0;  // spin_us = 0: sleep at once
    if (polling && (idle_rounds % 64 != 0 || Clock::now() - idle_since < spin)) continue;
    slot.Release();
    idle_rounds = 0;
    absl::StatusOr<bool> sleep = requests.PrepareToSleep();
    if (!sleep.ok()) return Fail(std::string(sleep.status().message()));
    if (!*sleep) {
      // Requests wait but none may be taken (the answers owed fill the completion ring): wait
      // for the client to read or a get in flight to finish, rather than loop without sleeping.
      if (owed_fill_ring()) WaitForCompletionRoom();
      continue;
    }
    pollfd fds[2] = {{daemon_bell_.fd(), POLLIN, 0}, {queue_->wake.fd(), POLLIN, 0}};
    (void)::poll(fds, 2, pending.empty() ? kIdleSleepMs : kFullCompletionRingPollMs);
    requests.EndSleep();
    daemon_bell_.Drain();
    queue_->wake.Drain();
  }
}

int UsableCpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? std::max(1, CPU_COUNT(&cpus)) : 1;
}

int DefaultSpinSlots() { return std::max(1, UsableCpus() / 2); }

}  // namespace kvtier
