// Stop strings matched on the text as it streams (OpenAI's `stop`): the generated text is cut right
// before the first occurrence of any stop string, and the stop string itself is never emitted. A
// stop string may be split across tokens (or across any number of them), so text that could still
// become the start of a stop string is held back until the next piece shows whether it does.
//
// Not thread-safe: one matcher per request.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvtier::serve {

class StopMatcher {
 public:
  // Precondition: no stop string is empty. None: Push returns its input as it is.
  explicit StopMatcher(std::vector<std::string> stops);

  // Feeds the next piece of text; returns the text that is now safe to emit (possibly empty).
  // Once a stop string has matched, stopped() is true and every later call returns "".
  std::string Push(std::string_view text);

  // The end of the text: what was held back (it did not turn into a stop string).
  std::string Flush();

  bool stopped() const { return stopped_; }

 private:
  // The length of the longest suffix of held_ that is a proper prefix of a stop string.
  size_t PartialMatchLength() const;

  std::vector<std::string> stops_;
  std::string held_;  // text not emitted yet: at most the longest stop string's length - 1
  bool stopped_ = false;
};

}  // namespace kvtier::serve
