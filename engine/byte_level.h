// GPT-2's byte-level alphabet, as Hugging Face's ByteLevel pre-tokenizer and decoder use it: every
// byte 0..255 is spelled as one printable Unicode character (printable ASCII and Latin-1 bytes as
// themselves, the rest as U+0100 + n), so vocabulary entries of byte-level BPE files are strings of
// these characters. The tokenizer works on raw bytes and converts vocabulary strings once, at load.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvtier::engine {

// The character (as UTF-8) that spells byte `b`.
std::string_view ByteLevelChar(unsigned char b);

// The raw bytes a byte-level string spells, or nullopt when a character of `s` is not in the
// alphabet (added tokens such as "<|im_start|>" are in it; one with a space is not).
std::optional<std::string> ByteLevelToBytes(std::string_view s);

// `s` spelled in the byte-level alphabet.
std::string BytesToByteLevel(std::string_view s);

}  // namespace kvtier::engine
