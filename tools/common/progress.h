// A progress bar on stderr for long runs. Silent when stderr is not a terminal (CI logs, pipes), so
// output that is captured stays clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kvtier {

class ProgressBar {
 public:
  // `label` prefixes the bar ("replay", "sweep"). Enabled only if stderr is a terminal, unless
  // `force` is set (tests).
  explicit ProgressBar(std::string label, bool force = false);
  ~ProgressBar();  // finishes the line if anything was drawn
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Redraws at most ~10 times a second; cheap to call often. total == 0 draws a spinner and count.
  void Update(uint64_t done, uint64_t total);
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
  // The latest Update, drawn once more by the destructor if the rate limit skipped it.
  uint64_t done_ = 0, total_ = 0;
  bool latest_drawn_ = true;
};

}  // namespace kvtier
