#include "daemon/accept_backoff.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvtier {
namespace {

double Seconds(AcceptBackoff::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

std::chrono::milliseconds AcceptBackoff::Failed(Clock::time_point now, std::string_view why,
                                                std::string* line) {
  line->clear();
  ++unlogged_;
  if (failures_++ == 0) {
    first_failure_ = now;
    last_line_ = now;
    wait_ = kFirstWait;
    unlogged_ = 0;
    *line = fmt::format(
        "accept failed: {}; retrying after {} ms, backing off to {} ms, one line per {} s while "
        "it fails",
        why, kFirstWait.count(), kMostWait.count(), kLogInterval.count());
    return wait_;
  }
  wait_ = std::min(wait_ * 2, kMostWait);
  if (now - last_line_ >= kLogInterval) {
    *line = fmt::format("accept failed {} more times in the last {:.1f} s: {}", unlogged_,
                        Seconds(now - last_line_), why);
    last_line_ = now;
    unlogged_ = 0;
  }
  return wait_;
}

std::string AcceptBackoff::Succeeded(Clock::time_point now) {
  if (failures_ == 0) return std::string();
  const std::string line = fmt::format("accepting again after {} failed accepts over {:.1f} s",
                                       failures_, Seconds(now - first_failure_));
  failures_ = 0;
  unlogged_ = 0;
  wait_ = std::chrono::milliseconds(0);
  return line;
}

}  // namespace kvtier
