// A flat_hash_map keyed by std::string that is looked up by std::string_view without a copy.
// Debian's abseil has its own absl::string_view (distinct from std::string_view), so abseil's
// built-in heterogeneous lookup does not take std::string_view; these transparent functors do.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace kvtier::engine {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct StringViewEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

template <typename V>
using StringMap = absl::flat_hash_map<std::string, V, StringViewHash, StringViewEq>;

}  // namespace kvtier::engine
