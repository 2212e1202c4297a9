// Code-point helpers for the chat template's string methods (Python strings are sequences of code
// points, not bytes).
#pragma once

#include <string>
#include <string_view>

namespace kvtier::engine::jinja {

std::u32string ToU32(std::string_view s);
std::string FromU32(std::u32string_view s);
// Python's str.isspace() for one code point.
bool IsPySpace(char32_t c);
// Python's str.strip/lstrip/rstrip: `chars` (UTF-8) null means whitespace.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);

}  // namespace kvtier::engine::jinja
