// AcceptBackoff: how the control socket's accept loop rides out failures instead of spinning.
//
// An accept that fails for want of resources (EMFILE or ENFILE when the daemon is out of file
// descriptors, ENOBUFS, ENOMEM) leaves the connection queued, so an accept retried at once fails
// again at once: the loop ran at 100% CPU and wrote ~70 MB/s of identical log lines. Instead, after
// a failure the loop waits: kFirstWait, doubling while failures go on, up to kMostWait, so it
// retries a few times a second at most and is back within kMostWait of descriptors coming back.
// It logs the first failure, then at most one line per kLogInterval with the number of failures
// since the last line, and one line when an accept works again.
//
// Thread-safety: none; the server's io thread alone uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvtier {

class AcceptBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kFirstWait{10};
  static constexpr std::chrono::milliseconds kMostWait{100};
  static constexpr std::chrono::seconds kLogInterval{10};

  // An accept failed at `now` with `why`: how long to wait before the next. `*line` gets a log
  // line when one is due, else is cleared.
  std::chrono::milliseconds Failed(Clock::time_point now, std::string_view why, std::string* line);
  // An accept worked at `now`: a line saying how many failed before it, when any did; else empty.
  std::string Succeeded(Clock::time_point now);

  // Failed accepts since the last one that worked.
  uint64_t failures() const { return failures_; }

 private:
  std::chrono::milliseconds wait_{0};
  uint64_t failures_ = 0;  // since the last accept that worked
  uint64_t unlogged_ = 0;  // failures not counted in a line yet
  Clock::time_point first_failure_;
  Clock::time_point last_line_;
};

}  // namespace kvtier
