#include "engine/byte_level.h"

#include <array>

#include "engine/utf8.h"

namespace kvtier::engine {
namespace {

struct Alphabet {
  std::array<std::string, 256> spelling;  // byte -> UTF-8 of its character
  std::array<int16_t, 324> byte_of_char;  // code point (< 0x144) -> byte, or -1
};

// GPT-2's bytes_to_unicode(): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF are their own code points;
// the other 68 bytes, in increasing order, get U+0100, U+0101, ...
Alphabet MakeAlphabet() {
  Alphabet a;
  a.byte_of_char.fill(-1);
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const char32_t c = self ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
    AppendUtf8(c, &a.spelling[b]);
    a.byte_of_char[c] = static_cast<int16_t>(b);
  }
  return a;
}

const Alphabet& TheAlphabet() {
  static const Alphabet* const alphabet = new Alphabet(MakeAlphabet());
  return *alphabet;
}

}  // namespace

std::string_view ByteLevelChar(unsigned char b) { return TheAlphabet().spelling[b]; }

std::optional<std::string> ByteLevelToBytes(std::string_view s) {
  const Alphabet& a = TheAlphabet();
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    if (ValidSequenceLength(s.substr(pos)) == 0) return std::nullopt;
    const char32_t c = NextCodePoint(s, &pos);
    if (c >= a.byte_of_char.size() || a.byte_of_char[c] < 0) return std::nullopt;
    out.push_back(static_cast<char>(a.byte_of_char[c]));
  }
  return out;
}

std::string BytesToByteLevel(std::string_view s) {
  std::string out;
  out.reserve(s.size() * 2);
  for (const char ch : s) out.append(ByteLevelChar(static_cast<unsigned char>(ch)));
  return out;
}

}  // namespace kvtier::engine
