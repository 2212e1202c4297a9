// The pre-tokenizer of a tokenizer.json: splits normalized text into the words BPE merges within.
// Supported steps (as Hugging Face `tokenizers` defines them): Split (regex or string pattern; the
// Isolated, Removed, MergedWithPrevious and MergedWithNext behaviours; invert), ByteLevel (GPT-2's
// regex when use_regex; add_prefix_space only as the first step) and Digits; a Sequence applies
// them in order, each to every piece the previous one made. ByteLevel's byte->character mapping is
// not done here: the BPE model works on raw bytes (engine/byte_level.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/regex.h"

namespace kvtier::engine {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kDigits };
  Kind kind = Kind::kSplit;
  // kSplit: the pattern, whether it is a regex (else a literal string), what happens to matches.
  std::string pattern;
  bool pattern_is_regex = true;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel.
  bool add_prefix_space = false;
  bool use_regex = false;
  // kDigits.
  bool individual_digits = false;
};

// Immutable after Create; safe to share between threads.
class PreTokenizer {
 public:
  // Compiles every step's pattern. An error names the step (its index) and what is unsupported.
  static absl::StatusOr<PreTokenizer> Create(const std::vector<PreTokenizerStep>& steps);

  // Whether the steps include ByteLevel: then BPE symbols are bytes, not characters.
  bool byte_level() const { return byte_level_; }
  // Whether a space is put before text that does not start with one (ByteLevel add_prefix_space).
  bool add_prefix_space() const { return add_prefix_space_; }

  // Appends the words of `text` (valid UTF-8, already normalized and with the prefix space
  // added) to `words`, as views into `text`, in order. Fails only when a regex hits a PCRE2
  // resource limit (engine/regex.h).
  absl::Status Split(std::string_view text, std::vector<std::string_view>* words) const;

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: a step that only maps bytes
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };
  absl::Status ApplyStep(const Step& step, std::string_view piece,
                         std::vector<std::string_view>* out) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
};

}  // namespace kvtier::engine
