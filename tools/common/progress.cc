#include "tools/common/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

namespace kvtier {
namespace {

constexpr auto kMinRedrawInterval = std::chrono::milliseconds(100);
constexpr int kBarWidth = 30;

// 1234 -> "1234", 56789 -> "56.8k", 12345678 -> "12.3M": short enough to keep the line steady.
std::string Compact(uint64_t n) {
  if (n < 10000) return std::to_string(n);
  if (n < 1000000) return fmt::format("{:.1f}k", n / 1e3);
  if (n < 1000000000) return fmt::format("{:.1f}M", n / 1e6);
  return fmt::format("{:.2f}G", n / 1e9);
}

std::string Render(const std::string& label, uint64_t done, uint64_t total) {
  if (total == 0) {  // unknown size: a spinner that turns with the clock, and the count
    static constexpr char kSpin[] = "|/-\\";
    auto ticks = std::chrono::steady_clock::now().time_since_epoch() / kMinRedrawInterval;
    return fmt::format("\r{} {} {}\x1b[K", label, kSpin[ticks % 4], Compact(done));
  }
  double fraction = done >= total ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
  int filled = static_cast<int>(fraction * kBarWidth);
  return fmt::format("\r{} [{}{}] {:5.1f}% {}/{}\x1b[K", label, std::string(filled, '#'),
                     std::string(kBarWidth - filled, '.'), 100 * fraction, Compact(done),
                     Compact(total));
}

}  // namespace

ProgressBar::ProgressBar(std::string label, bool force)
    : label_(std::move(label)), enabled_(force || isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  if (!drawn_) return;
  std::string line = latest_drawn_ ? "" : Render(label_, done_, total_);
  std::fputs((line + "\n").c_str(), stderr);
  std::fflush(stderr);
}

void ProgressBar::Update(uint64_t done, uint64_t total) {
  if (!enabled_) return;
  done_ = done;
  total_ = total;
  latest_drawn_ = false;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < kMinRedrawInterval) return;
  std::fputs(Render(label_, done, total).c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
  latest_drawn_ = true;
  last_draw_ = now;
}

}  // namespace kvtier
