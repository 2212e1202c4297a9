// The remote tier's circuit breaker: a store that is down or too slow makes the tier unavailable
// at once (calls fail fast instead of each waiting out its timeouts) while T0-T2 keep serving, and
// the tier comes back by itself when the store does (DESIGN.md "The remote tier").
//
//   closed ──(`failures` consecutive Failure)──► open ──(wait elapsed, one Allow)──► probing
//     ▲                                           ▲                                    │
//     └──────────────────── Success ──────────────┼─────────── Failure (wait doubles) ◄┘
//
// While open, Allow is false. The first Allow after the wait is true: that caller is the probe,
// and every other Allow is false until it reports Success or Failure. The first wait is open_ms;
// each failed probe doubles it up to open_max_ms; a Success resets it. Opening and closing are each
// logged once ("remote" component), with the reason.
//
// Stats::available is true only while closed. A probe in flight has not shown that the store is
// back, and every other call is still refused meanwhile: a tier that admitted on it would start
// writes that fail at Allow, and drop their blocks.
//
// Contract: every Allow that returned true is followed by exactly one Success or Failure.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"

namespace kvtier {

class CircuitBreaker {
 public:
  struct Options {
    uint32_t failures = 5;
    uint32_t open_ms = 1000;
    uint32_t open_max_ms = 30000;
  };
  struct Stats {
    bool available = true;  // closed: calls go through (false while open or probing)
    uint64_t opens = 0;     // closed -> open transitions
    uint64_t closes = 0;    // open -> closed (the store came back)
    uint64_t refused = 0;   // Allow answered false
  };

  explicit CircuitBreaker(Options options) : options_(options) {}

  bool Allow();
  void Success();
  // `why` is logged when this failure opens the breaker.
  void Failure(const absl::Status& why);
  Stats GetStats() const;

 private:
  using Clock = std::chrono::steady_clock;
  enum class State { kClosed, kOpen, kProbing };

  const Options options_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kClosed;
  uint32_t consecutive_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t wait_ms_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point probe_at_ ABSL_GUARDED_BY(mu_);
  Clock::time_point opened_at_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier
