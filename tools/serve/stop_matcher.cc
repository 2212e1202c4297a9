#include "tools/serve/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace kvtier::serve {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

std::string StopMatcher::Push(std::string_view text) {
  if (stopped_) return std::string();
  held_.append(text);
  if (stops_.empty()) return std::exchange(held_, std::string());
  // The earliest occurrence wins, whichever stop string it is: the text ends before it.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  const size_t keep = PartialMatchLength();
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  if (stopped_) return std::string();
  return std::exchange(held_, std::string());
}

size_t StopMatcher::PartialMatchLength() const {
  size_t best = 0;
  for (const std::string& stop : stops_) {
    const size_t most = std::min(stop.size() - 1, held_.size());
    for (size_t n = most; n > best; --n) {
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(stop).substr(0, n)) {
        best = n;
        break;
      }
    }
  }
  return best;
}

}  // namespace kvtier::serve
