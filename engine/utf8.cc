#include "engine/utf8.h"

namespace kvtier::engine {
namespace {

// The number of bytes of the longest prefix of `s` (at most 4) that can begin a well-formed
// sequence, following the Unicode "maximal subpart" table: the lead byte fixes the range allowed
// for the second byte (E0: A0..BF, ED: 80..9F, F0: 90..BF, F4: 80..8F), later bytes are 80..BF.
// Sets *need to the full length the lead byte announces (0 for a byte that can lead nothing).
size_t WellFormedPrefix(std::string_view s, size_t* need) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  *need = 0;
  if (b0 < 0x80) {
    *need = 1;
    return 1;
  }
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    *need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    *need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    *need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  size_t n = 1;
  while (n < *need && n < s.size()) {
    const auto b = static_cast<uint8_t>(s[n]);
    if (b < lo || b > hi) break;
    lo = 0x80;
    hi = 0xBF;
    ++n;
  }
  return n;
}

}  // namespace

size_t ValidSequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  size_t need = 0;
  const size_t n = WellFormedPrefix(s, &need);
  return n == need ? n : 0;
}

size_t ValidPrefixLength(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t n = ValidSequenceLength(s.substr(pos));
    if (n == 0) break;
    pos += n;
  }
  return pos;
}

size_t IncompleteSuffixLength(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const std::string_view tail = s.substr(s.size() - back);
    size_t need = 0;
    if (WellFormedPrefix(tail, &need) == back && need > back) return back;
  }
  return 0;
}

std::string LossyUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t valid = ValidPrefixLength(s.substr(pos));
    out.append(s.substr(pos, valid));
    pos += valid;
    if (pos == s.size()) break;
    size_t need = 0;
    const size_t bad = WellFormedPrefix(s.substr(pos), &need);
    out.append(kReplacementChar);
    pos += bad == 0 ? 1 : bad;  // a maximal subpart, or one byte that starts nothing
  }
  return out;
}

char32_t NextCodePoint(std::string_view s, size_t* pos) {
  const auto b0 = static_cast<uint8_t>(s[*pos]);
  const size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  char32_t c = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < n; ++i) c = (c << 6) | (static_cast<uint8_t>(s[*pos + i]) & 0x3F);
  *pos += n;
  return c;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace kvtier::engine
