#include "tiers/remote/circuit_breaker.h"

#include <algorithm>

#include "common/log.h"

namespace kvtier {

bool CircuitBreaker::Allow() {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kClosed) return true;
  if (state_ == State::kOpen && Clock::now() >= probe_at_) {
    state_ = State::kProbing;
    return true;
  }
  ++stats_.refused;
  return false;
}

void CircuitBreaker::Success() {
  absl::MutexLock lock(&mu_);
  consecutive_ = 0;
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  wait_ms_ = 0;
  ++stats_.closes;
  const double down_s = std::chrono::duration<double>(Clock::now() - opened_at_).count();
  KVTIER_LOG(kWarn, "remote", "the store answers again after {:.1f} s: remote tier available",
             down_s);
}

void CircuitBreaker::Failure(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kProbing) {
    wait_ms_ = std::min(wait_ms_ * 2, options_.open_max_ms);
    state_ = State::kOpen;
    probe_at_ = Clock::now() + std::chrono::milliseconds(wait_ms_);
    return;
  }
  if (state_ == State::kOpen || ++consecutive_ < options_.failures) return;
  state_ = State::kOpen;
  wait_ms_ = options_.open_ms;
  opened_at_ = Clock::now();
  probe_at_ = opened_at_ + std::chrono::milliseconds(wait_ms_);
  ++stats_.opens;
  KVTIER_LOG(kWarn, "remote",
             "remote tier unavailable after {} failed calls in a row (last: {}); calls fail at "
             "once, the store is probed again from {} ms on",
             consecutive_, std::string(why.message()), wait_ms_);
}

CircuitBreaker::Stats CircuitBreaker::GetStats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.available = state_ == State::kClosed;
  return s;
}

}  // namespace kvtier
