#include "engine/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "engine/jinja_strings.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja {
namespace {

absl::Status TypeError(std::string_view what, const Value& v) {
  return absl::InvalidArgumentError(fmt::format("{} ({})", what, v.TypeName()));
}

}  // namespace

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v,
                               const std::vector<Value>& args) {
  using K = Value::Kind;
  const Value arg = args.empty() ? Value() : args[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.boolean();
  if (name == "false") return v.kind() == K::kBool && !v.boolean();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "number") return v.is_number() || v.kind() == K::kBool;
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "iterable" || name == "sequence")
    return v.is_string() || v.is_array() || v.is_object();
  if (name == "callable") return v.kind() == K::kFunction;
  if (name == "odd" || name == "even")
    return v.kind() == K::kInt && (v.integer() % 2 != 0) == (name == "odd");
  if (name == "divisibleby") return arg.integer() != 0 && v.integer() % arg.integer() == 0;
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return v.Equals(arg);
  if (name == "ne" || name == "!=") return !v.Equals(arg);
  if (name == "in") return Contains(arg, v);
  if (name == "lower" || name == "upper") {
    const std::string s = v.Str();
    return std::none_of(s.begin(), s.end(), [&](char c) {
      return name == "lower" ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z');
    });
  }
  for (const auto& [test, want] : std::initializer_list<std::pair<std::string_view, int>>{
           {"lt", -1}, {"<", -1}, {"lessthan", -1}, {"gt", 1}, {">", 1}, {"greaterthan", 1}}) {
    if (name == test) {
      KVTIER_ASSIGN_OR_RETURN(int c, Compare(v, arg));
      return c == want;
    }
  }
  if (name == "le" || name == "<=" || name == "ge" || name == ">=") {
    KVTIER_ASSIGN_OR_RETURN(int c, Compare(v, arg));
    return name[0] == 'l' || name[0] == '<' ? c <= 0 : c >= 0;
  }
  return absl::NotFoundError(fmt::format("no test named \"{}\"", name));
}

absl::StatusOr<int> Compare(const Value& a, const Value& b) {
  if ((a.is_number() || a.kind() == Value::Kind::kBool) &&
      (b.is_number() || b.kind() == Value::Kind::kBool)) {
    const double x = a.kind() == Value::Kind::kBool ? a.boolean() : a.number();
    const double y = b.kind() == Value::Kind::kBool ? b.boolean() : b.number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string())
    return a.string() < b.string() ? -1 : a.string() > b.string() ? 1 : 0;
  return absl::InvalidArgumentError(
      fmt::format("cannot compare {} with {}", a.TypeName(), b.TypeName()));
}

absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    if (!needle.is_string()) return TypeError("'in <string>' needs a string on the left", needle);
    return haystack.string().find(needle.string()) != std::string::npos;
  }
  if (haystack.is_array()) {
    const Array& a = haystack.array();
    return std::any_of(a.begin(), a.end(), [&](const Value& x) { return x.Equals(needle); });
  }
  if (haystack.is_object()) return !haystack.Get(needle.Str()).is_undefined() && needle.is_string();
  if (haystack.is_undefined()) return absl::InvalidArgumentError("'in' on an undefined value");
  return TypeError("'in' needs a string, list or dict on the right", haystack);
}

absl::StatusOr<Array> Iterate(const Value& v) {
  if (v.is_array()) return v.array();
  if (v.is_object()) {
    Array keys;
    for (const auto& [k, x] : v.object()) keys.push_back(Value(k));
    return keys;
  }
  if (v.is_string()) {
    Array chars;
    for (const char32_t c : ToU32(v.string()))
      chars.push_back(Value(FromU32(std::u32string(1, c))));
    return chars;
  }
  if (v.is_undefined()) return absl::InvalidArgumentError("cannot iterate over an undefined value");
  return TypeError("cannot iterate over this value", v);
}

int64_t Length(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(ToU32(v.string()).size());
  if (v.is_array()) return static_cast<int64_t>(v.array().size());
  if (v.is_object()) return static_cast<int64_t>(v.object().size());
  return 0;
}

absl::StatusOr<Value> Slice(const Value& v, const Value& start, const Value& stop,
                            const Value& step) {
  const int64_t n = Length(v);
  const int64_t st = step.is_number() ? step.integer() : 1;
  if (st == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](const Value& x, int64_t dflt) {
    if (!x.is_number()) return dflt;
    int64_t i = x.integer();
    if (i < 0) i = std::max<int64_t>(i + n, st < 0 ? -1 : 0);
    return std::min<int64_t>(i, st < 0 ? n - 1 : n);
  };
  const int64_t b = adjust(start, st < 0 ? n - 1 : 0), e = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> picks;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) picks.push_back(i);
  if (v.is_string()) {
    const std::u32string u = ToU32(v.string());
    std::u32string out;
    for (const int64_t i : picks) out.push_back(u[i]);
    return Value(FromU32(out));
  }
  if (!v.is_array()) return TypeError("only strings and lists can be sliced", v);
  Array out;
  for (const int64_t i : picks) out.push_back(v.array()[i]);
  return Value::FromArray(std::move(out));
}

}  // namespace kvtier::engine::jinja
