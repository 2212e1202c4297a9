// A compiled PCRE2 pattern for the pre-tokenizer's Split steps: UTF-8 mode with Unicode properties
// (\p{L}, \p{N}; \s, \w and \d by Unicode rules), lookahead, JIT-compiled where the platform
// allows.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "common/status.h"

namespace kvtier::engine {

class Regex {
 public:
  // Compiles `pattern` (a regex, or with `literal`, a plain string to find). An error quotes the
  // pattern and PCRE2's message and offset.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern, bool literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls `match(begin, end)` for each leftmost non-overlapping match in `text` (valid UTF-8), in
  // order. An empty match is skipped (the search resumes one character later). A match the JIT
  // cannot finish (its stack is too small for a very long run) is retried by the interpreter; an
  // error is returned only when that fails too (a resource limit), naming the byte offset.
  // Thread-safe.
  absl::Status FindAll(std::string_view text, absl::FunctionRef<void(size_t, size_t)> match) const;

 private:
  struct Impl;
  explicit Regex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::engine
