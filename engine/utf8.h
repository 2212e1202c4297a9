// UTF-8 helpers for the tokenizer: validation, the length of a sequence, and the lossy conversion
// Hugging Face `tokenizers` applies when decoded bytes are not valid UTF-8 (Rust's
// String::from_utf8_lossy: each maximal invalid subpart becomes one U+FFFD).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvtier::engine {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at `s[0]` (1 to 4), or 0 when `s` does not start
// with a complete, well-formed sequence (overlong forms, surrogates and values above U+10FFFF are
// ill-formed, as in Rust and the Unicode standard).
size_t ValidSequenceLength(std::string_view s);

// Length of the longest prefix of `s` that is valid UTF-8.
size_t ValidPrefixLength(std::string_view s);

inline bool IsValidUtf8(std::string_view s) { return ValidPrefixLength(s) == s.size(); }

// The length of the longest suffix of `s` that is a proper prefix of some well-formed sequence
// (0 to 3 bytes): what a streaming decoder must hold back because more bytes may complete it.
size_t IncompleteSuffixLength(std::string_view s);

// `s` with every maximal invalid subpart replaced by U+FFFD (from_utf8_lossy's rule).
std::string LossyUtf8(std::string_view s);

// Decodes the code point at `s[*pos]` (which must start a valid sequence) and advances *pos.
char32_t NextCodePoint(std::string_view s, size_t* pos);

// Appends the UTF-8 encoding of `c` (a Unicode scalar value) to `out`.
void AppendUtf8(char32_t c, std::string* out);

}  // namespace kvtier::engine
