// Jinja's filters (`value | name(args)`), as engine/jinja_builtins.h lists them.
#include <algorithm>
#include <charconv>
#include <cmath>

#include "engine/jinja_builtins.h"
#include "engine/jinja_strings.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja {
namespace {

absl::Status TypeError(std::string_view what, const Value& v) {
  return absl::InvalidArgumentError(fmt::format("{} ({})", what, v.TypeName()));
}

// Argument `index` or keyword `key` of a call, else `fallback`.
Value Arg(const CallArgs& args, size_t index, std::string_view key, Value fallback = Value()) {
  for (const auto& [k, v] : args.keyword) {
    if (k == key) return v;
  }
  return index < args.positional.size() ? args.positional[index] : fallback;
}

// `item`'s attribute path "a.b" (selectattr, map, sort, join).
Value Attribute(const Value& item, std::string_view path) {
  Value v = item;
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t dot = std::min(path.find('.', begin), path.size());
    v = v.Get(path.substr(begin, dot - begin));
    begin = dot + 1;
  }
  return v;
}

absl::StatusOr<Value> ToJsonFilter(const Value& v, const CallArgs& args) {
  const Value indent = Arg(args, 0, "indent");
  const Value separators = Arg(args, 1, "separators");
  const int width = indent.kind() == Value::Kind::kInt ? static_cast<int>(indent.integer()) : -1;
  std::string item_sep = width < 0 ? ", " : ",", key_sep = ": ";
  if (separators.is_array() && separators.array().size() == 2) {
    item_sep = separators.array()[0].Str();
    key_sep = separators.array()[1].Str();
  }
  KVTIER_ASSIGN_OR_RETURN(std::string json,
                          v.ToJson(width, item_sep, key_sep, Arg(args, 2, "sort_keys").Truthy(),
                                   Arg(args, 3, "ensure_ascii").Truthy()));
  return Value(std::move(json));
}

absl::StatusOr<Value> SelectFilter(std::string_view name, const Value& v, const CallArgs& args) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep = name == "selectattr" || name == "select";
  KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
  const size_t test_at = by_attr ? 1 : 0;
  std::vector<Value> test_args(
      args.positional.begin() + std::min(args.positional.size(), test_at + 1),
      args.positional.end());
  Array out;
  for (const Value& item : items) {
    const Value subject = by_attr ? Attribute(item, Arg(args, 0, "attribute").Str()) : item;
    bool pass = subject.Truthy();
    if (args.positional.size() > test_at) {
      KVTIER_ASSIGN_OR_RETURN(pass, ApplyTest(args.positional[test_at].Str(), subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::FromArray(std::move(out));
}

absl::StatusOr<Value> MapFilter(const Value& v, CallArgs& args) {
  KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
  const Value attribute = Arg(args, 99, "attribute");
  Array out;
  if (!attribute.is_undefined()) {
    for (const Value& item : items) {
      Value a = Attribute(item, attribute.Str());
      out.push_back(a.is_undefined() ? Arg(args, 99, "default") : a);
    }
    return Value::FromArray(std::move(out));
  }
  if (args.positional.empty())
    return absl::InvalidArgumentError("map needs a filter name or attribute=");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  for (const Value& item : items) {
    KVTIER_ASSIGN_OR_RETURN(Value mapped, ApplyFilter(args.positional[0].Str(), item, rest));
    out.push_back(std::move(mapped));
  }
  return Value::FromArray(std::move(out));
}

absl::StatusOr<Value> JoinFilter(const Value& v, const CallArgs& args) {
  KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
  const std::string sep = Arg(args, 0, "d", Value("")).Str();
  const Value attribute = Arg(args, 1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i ? sep : "") +
           (attribute.is_undefined() ? items[i] : Attribute(items[i], attribute.Str())).Str();
  }
  return Value(std::move(out));
}

std::string Indent(const std::string& s, const CallArgs& args) {
  const Value w = Arg(args, 0, "width", Value(int64_t{4}));
  const std::string pad =
      w.is_string() ? w.string()
                    : std::string(static_cast<size_t>(std::max<int64_t>(0, w.integer())), ' ');
  const bool first = Arg(args, 1, "first").Truthy(), blank = Arg(args, 2, "blank").Truthy();
  std::string out;
  size_t begin = 0;
  for (int line = 0; begin <= s.size(); ++line) {
    const size_t nl = std::min(s.find('\n', begin), s.size());
    const std::string_view text = std::string_view(s).substr(begin, nl - begin);
    if ((line > 0 || first) && (blank || !text.empty())) out += pad;
    out += text;
    if (nl < s.size()) out += '\n';
    begin = nl + 1;
  }
  return out;
}

absl::StatusOr<Value> SortFilter(const Value& v, const CallArgs& args) {
  KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
  const bool reverse = Arg(args, 0, "reverse").Truthy();
  const Value attribute = Arg(args, 2, "attribute");
  absl::Status error;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const Value x = attribute.is_undefined() ? a : Attribute(a, attribute.Str());
    const Value y = attribute.is_undefined() ? b : Attribute(b, attribute.Str());
    auto c = Compare(x, y);
    if (!c.ok()) error = c.status();
    return c.ok() && (reverse ? *c > 0 : *c < 0);
  });
  KVTIER_RETURN_IF_ERROR(error);
  return Value::FromArray(std::move(items));
}

absl::StatusOr<Value> StringFilter(std::string_view name, const Value& v, const CallArgs& args,
                                   bool* found) {
  *found = true;
  const std::string s = v.Str();
  if (name == "trim") {
    const Value chars = Arg(args, 0, "chars");
    const std::string set = chars.Str();
    return Value(PyStrip(s, chars.is_string() ? &set : nullptr, true, true));
  }
  if (name == "string") return Value(s);
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    CallArgs none;
    bool method = false;
    return CallMethod(Value(s), name, none, &method);
  }
  if (name == "indent") return Value(Indent(s, args));
  if (name == "safe") return v;
  if (name == "e" || name == "escape") {
    std::string out;
    for (const char c : s) {
      out += c == '&'    ? "&amp;"
             : c == '<'  ? "&lt;"
             : c == '>'  ? "&gt;"
             : c == '"'  ? "&#34;"
             : c == '\'' ? "&#39;"
                         : std::string(1, c);
    }
    return Value(std::move(out));
  }
  *found = false;
  return Value();
}

// Filters over a sequence.
absl::StatusOr<Value> ListFilter(std::string_view name, const Value& v, CallArgs& args,
                                 bool* found) {
  *found = true;
  if (name == "list") {
    KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
    return Value::FromArray(std::move(items));
  }
  if (name == "first" || name == "last") {
    KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) return Slice(v, Value::None(), Value::None(), Value(int64_t{-1}));
    KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
    std::reverse(items.begin(), items.end());
    return Value::FromArray(std::move(items));
  }
  if (name == "join") return JoinFilter(v, args);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return SelectFilter(name, v, args);
  if (name == "map") return MapFilter(v, args);
  if (name == "sort") return SortFilter(v, args);
  if (name == "items") {
    if (!v.is_object()) return TypeError("items needs a dict", v);
    Array out;
    for (const auto& [k, x] : v.object())
      out.push_back(Value::FromArray({Value(k), x}, /*is_tuple=*/true));
    return Value::FromArray(std::move(out));
  }
  if (name == "unique") {
    KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
    Array out;
    for (const Value& x : items) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return y.Equals(x); }))
        out.push_back(x);
    }
    return Value::FromArray(std::move(out));
  }
  *found = false;
  return Value();
}

// Numeric conversions and arithmetic.
absl::StatusOr<Value> NumberFilter(std::string_view name, const Value& v, CallArgs& args,
                                   bool* found) {
  *found = true;
  if (name == "int") {
    if (v.kind() == Value::Kind::kFloat) return Value(static_cast<int64_t>(v.number()));
    if (v.is_number() || v.kind() == Value::Kind::kBool)
      return Value(v.kind() == Value::Kind::kBool ? int64_t{v.boolean()} : v.integer());
    const std::string text = PyStrip(v.Str(), nullptr, true, true);
    int64_t i = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
    if (ec == std::errc() && end == text.data() + text.size()) return Value(i);
    double f = 0;  // Jinja: int("3.9") fails, int(float("3.9")) is 3
    const auto [fend, fec] = std::from_chars(text.data(), text.data() + text.size(), f);
    if (fec != std::errc() || fend != text.data() + text.size() || !std::isfinite(f))
      return Arg(args, 0, "default", Value(int64_t{0}));
    return Value(static_cast<int64_t>(f));
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.number());
    const std::string text = PyStrip(v.Str(), nullptr, true, true);
    double f = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), f);
    if (ec != std::errc() || end != text.data() + text.size())
      return Arg(args, 0, "default", Value(0.0));
    return Value(f);
  }
  if (name == "abs") {
    if (v.kind() == Value::Kind::kInt) return Value(v.integer() < 0 ? -v.integer() : v.integer());
    return Value(std::fabs(v.number()));
  }
  if (name == "round") {
    const double scale =
        std::pow(10.0, static_cast<double>(Arg(args, 0, "precision", Value(int64_t{0})).integer()));
    return Value(std::round(v.number() * scale) / scale);
  }
  if (name == "sum") {
    KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(v));
    int64_t total = 0;
    for (const Value& x : items) total += x.integer();
    return Value(total);
  }
  *found = false;
  return Value();
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& v, CallArgs& args) {
  bool found = false;
  KVTIER_ASSIGN_OR_RETURN(Value s, StringFilter(name, v, args, &found));
  if (found) return s;
  KVTIER_ASSIGN_OR_RETURN(s, ListFilter(name, v, args, &found));
  if (found) return s;
  KVTIER_ASSIGN_OR_RETURN(s, NumberFilter(name, v, args, &found));
  if (found) return s;
  if (name == "tojson") return ToJsonFilter(v, args);
  if (name == "length" || name == "count") return Value(Length(v));
  if (name == "default" || name == "d") {
    const bool use = v.is_undefined() || (Arg(args, 1, "boolean").Truthy() && !v.Truthy());
    return use ? Arg(args, 0, "default_value", Value("")) : v;
  }
  if (name == "replace") {
    CallArgs method_args{{Arg(args, 0, "old"), Arg(args, 1, "new")}, {}};
    if (const Value count = Arg(args, 2, "count"); !count.is_undefined())
      method_args.positional.push_back(count);
    bool method = false;
    return CallMethod(Value(v.Str()), "replace", method_args, &method);
  }
  return absl::NotFoundError(fmt::format("no filter named \"{}\"", name));
}

}  // namespace kvtier::engine::jinja
