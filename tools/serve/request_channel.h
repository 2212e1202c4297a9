// What passes from the engine thread to the HTTP session of one request: acceptance, the text
// generated so far (already detokenized and cut at stop strings), and how it ended. The engine
// thread writes; the session takes what arrived since its last look. After every write the
// channel calls `notify`, which wakes the session on its own executor (it never runs session code
// on the engine thread).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"
#include "engine/sequence.h"

namespace kvtier::serve {

// How a finished request ended and what it used (the response's finish_reason and usage).
struct Completion {
  std::string finish_reason;  // "stop" or "length"
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens taken from the prefix cache
  // cached_tokens by where the cache held them: this engine's own pool, T0, T1, T2, T3 (the
  // engine's CacheSource order).
  engine::CachedBySource cached_from{};
  int32_t preemptions = 0;  // times the engine preempted it (its blocks offloaded, then resumed)
};

class RequestChannel {
 public:
  explicit RequestChannel(std::function<void()> notify) : notify_(std::move(notify)) {}

  // ---- The engine thread. ----
  void Accept();                       // the engine took the request
  void Append(std::string_view text);  // more text (may be empty: a token that showed none yet)
  void Finish(Completion completion);
  void Fail(absl::Status status);  // refused at Add (InvalidArgument) or a failed step
  void Cancelled();                // cancelled (the client left, or the server stops)

  // ---- The session. ----
  struct Taken {
    bool accepted = false;
    std::string text;  // appended since the last Take
    std::optional<Completion> completion;
    absl::Status error;  // not OK: failed
    bool cancelled = false;
    bool ended() const { return completion.has_value() || !error.ok() || cancelled; }
  };
  Taken Take();

 private:
  template <typename F>
  void Update(F f);

  const std::function<void()> notify_;
  absl::Mutex mu_;
  Taken state_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier::serve
