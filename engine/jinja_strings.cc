#include "engine/jinja_strings.h"

#include "engine/utf8.h"

namespace kvtier::engine::jinja {

std::u32string ToU32(std::string_view s) {
  std::u32string out;
  size_t pos = 0;
  while (pos < s.size()) {
    if (ValidSequenceLength(s.substr(pos)) == 0) {  // not UTF-8: keep the byte as a code point
      out.push_back(static_cast<unsigned char>(s[pos++]));
      continue;
    }
    out.push_back(NextCodePoint(s, &pos));
  }
  return out;
}

std::string FromU32(std::u32string_view s) {
  std::string out;
  for (const char32_t c : s) AppendUtf8(c, &out);
  return out;
}

bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::u32string u = ToU32(s);
  const std::u32string set = chars ? ToU32(*chars) : std::u32string();
  auto strip = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : IsPySpace(c);
  };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip(u[e - 1])) --e;
  }
  return FromU32(std::u32string_view(u).substr(b, e - b));
}

}  // namespace kvtier::engine::jinja
