// The normalizer of a tokenizer.json ("normalizer": null, a Unicode normal form, or a Sequence of
// them): applied to the text between added tokens before pre-tokenization, as Hugging Face
// `tokenizers` does. Qwen's files name NFC; Llama 3's and Mistral's name none.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::engine {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Parses a normalizer "type" name ("NFC", "NFKD", ...); an error names any other type.
absl::StatusOr<NormalForm> ParseNormalForm(std::string_view type);

// Applies normal forms in order. Immutable after construction; safe to share between threads.
class Normalizer {
 public:
  explicit Normalizer(std::vector<NormalForm> forms) : forms_(std::move(forms)) {}

  bool empty() const { return forms_.empty(); }

  // `text` (valid UTF-8) normalized. ASCII text is returned unchanged without calling ICU.
  std::string Normalize(std::string_view text) const;

 private:
  std::vector<NormalForm> forms_;
};

}  // namespace kvtier::engine
