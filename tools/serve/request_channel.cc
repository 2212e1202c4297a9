#include "tools/serve/request_channel.h"

#include <utility>

namespace kvtier::serve {

template <typename F>
void RequestChannel::Update(F f) {
  {
    absl::MutexLock lock(&mu_);
    f(state_);
  }
  notify_();
}

void RequestChannel::Accept() {
  Update([](Taken& s) { s.accepted = true; });
}

void RequestChannel::Append(std::string_view text) {
  if (text.empty()) return;
  Update([text](Taken& s) { s.text.append(text); });
}

void RequestChannel::Finish(Completion completion) {
  Update([&completion](Taken& s) { s.completion = std::move(completion); });
}

void RequestChannel::Fail(absl::Status status) {
  Update([&status](Taken& s) { s.error = std::move(status); });
}

void RequestChannel::Cancelled() {
  Update([](Taken& s) { s.cancelled = true; });
}

RequestChannel::Taken RequestChannel::Take() {
  absl::MutexLock lock(&mu_);
  Taken out = state_;
  state_.text.clear();
  return out;
}

}  // namespace kvtier::serve
