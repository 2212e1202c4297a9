// The normalizer of a tokenizer.json, applied to the text between added tokens before
// pre-tokenization, as Hugging Face `tokenizers` does: null, a Unicode normal form (Qwen: NFC),
// Prepend and Replace with a string pattern (SentencePiece-style files such as Llama 2 and
// Mistral 7B: prepend "▁", replace " " with "▁"), or a Sequence of them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::engine {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Parses a normalizer "type" name ("NFC", "NFKD", ...); an error names any other type.
absl::StatusOr<NormalForm> ParseNormalForm(std::string_view type);

struct NormalizerStep {
  enum class Kind { kForm, kPrepend, kReplace };
  Kind kind = Kind::kForm;
  NormalForm form = NormalForm::kNfc;  // kForm
  std::string text;                    // kPrepend: what to prepend; kReplace: the pattern
  std::string content;                 // kReplace: what replaces each occurrence
};

// Applies the steps in order. Immutable after construction; safe to share between threads.
class Normalizer {
 public:
  explicit Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

  bool empty() const { return steps_.empty(); }

  // `text` (valid UTF-8) normalized. Prepend applies to non-empty text only; normal forms leave
  // ASCII text unchanged without calling ICU.
  std::string Normalize(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace kvtier::engine
