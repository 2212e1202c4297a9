// Methods of str and dict values (Python's, as templates call them: message.content.split(...),
// tool.items()) and the global functions transformers gives templates.
#include <unicode/uchar.h>

#include <chrono>
#include <ctime>

#include "engine/jinja_builtins.h"
#include "engine/jinja_strings.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja {
namespace {

const Value& Pos(const CallArgs& args, size_t i) {
  static const Value* const kUndefined = new Value();
  return i < args.positional.size() ? args.positional[i] : *kUndefined;
}

std::string MapCase(const std::string& s, int mode) {  // 0 lower, 1 upper, 2 title, 3 capitalize
  std::u32string u = ToU32(s);
  bool prev_cased = false;
  for (size_t i = 0; i < u.size(); ++i) {
    const UChar32 c = static_cast<UChar32>(u[i]);
    bool upper = mode == 1 || (mode == 2 && !prev_cased) || (mode == 3 && i == 0);
    u[i] = static_cast<char32_t>(upper ? u_toupper(c) : u_tolower(c));
    prev_cased = u_hasBinaryProperty(c, UCHAR_CASED);
  }
  return FromU32(u);
}

Array Split(const std::string& s, const Value& sep, int64_t maxsplit) {
  Array out;
  if (sep.is_undefined() || sep.is_none()) {  // runs of whitespace; no empty strings
    const std::u32string u = ToU32(s);
    size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && IsPySpace(u[i])) ++i;
      if (i == u.size()) break;
      size_t j = i;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        j = u.size();
        while (j > i && IsPySpace(u[j - 1])) --j;
      } else {
        while (j < u.size() && !IsPySpace(u[j])) ++j;
      }
      out.push_back(Value(FromU32(std::u32string_view(u).substr(i, j - i))));
      i = j;
    }
    return out;
  }
  const std::string& d = sep.string();
  size_t begin = 0;
  while (true) {
    const size_t at = (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)
                          ? std::string::npos
                          : s.find(d, begin);
    if (at == std::string::npos || d.empty()) break;
    out.push_back(Value(s.substr(begin, at - begin)));
    begin = at + d.size();
  }
  out.push_back(Value(s.substr(begin)));
  return out;
}

absl::StatusOr<Value> AffixTest(const std::string& s, const Value& affix, bool prefix) {
  auto test = [&](const std::string& a) {
    return a.size() <= s.size() && (prefix ? s.compare(0, a.size(), a) == 0
                                           : s.compare(s.size() - a.size(), a.size(), a) == 0);
  };
  if (affix.is_string()) return Value(test(affix.string()));
  if (affix.is_array()) {
    for (const Value& a : affix.array()) {
      if (a.is_string() && test(a.string())) return Value(true);
    }
    return Value(false);
  }
  return absl::InvalidArgumentError(
      fmt::format("{}with needs a string or a tuple of strings", prefix ? "starts" : "ends"));
}

absl::StatusOr<Value> StringMethod(const std::string& s, std::string_view name, CallArgs& args,
                                   bool* found) {
  *found = true;
  const Value& a0 = Pos(args, 0);
  if (name == "startswith" || name == "endswith") return AffixTest(s, a0, name == "startswith");
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const std::string chars = a0.Str();
    return Value(PyStrip(s, a0.is_string() ? &chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Value sep = a0.is_undefined() ? [&] { for (auto& [k, v] : args.keyword) if (k == "sep") return v; return Value(); }() : a0;
    const Value max = Pos(args, 1);
    return Value::FromArray(Split(s, sep, max.is_number() ? max.integer() : -1));
  }
  if (name == "lower") return Value(MapCase(s, 0));
  if (name == "upper") return Value(MapCase(s, 1));
  if (name == "title") return Value(MapCase(s, 2));
  if (name == "capitalize") return Value(MapCase(s, 3));
  if (name == "replace") {
    const std::string from = a0.Str(), to = Pos(args, 1).Str();
    int64_t count = Pos(args, 2).is_number() ? Pos(args, 2).integer() : -1;
    std::string out;
    size_t begin = 0;
    while (count != 0 && !from.empty()) {
      const size_t at = s.find(from, begin);
      if (at == std::string::npos) break;
      out += s.substr(begin, at - begin) + to;
      begin = at + from.size();
      --count;
    }
    return Value(out + s.substr(begin));
  }
  if (name == "find" || name == "count") {
    const std::string needle = a0.Str();
    if (name == "find") {
      const size_t at = s.find(needle);
      return Value(at == std::string::npos ? int64_t{-1}
                                           : static_cast<int64_t>(ToU32(s.substr(0, at)).size()));
    }
    int64_t n = 0;
    for (size_t at = s.find(needle); at != std::string::npos && !needle.empty();
         at = s.find(needle, at + needle.size()))
      ++n;
    return Value(n);
  }
  if (name == "join") {
    KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(a0));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? s : "") + items[i].Str();
    return Value(std::move(out));
  }
  if (name == "splitlines") return Value::FromArray(Split(s, Value("\n"), -1));
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    const std::u32string u = ToU32(s);
    bool all = !u.empty();
    for (const char32_t c : u) {
      const UChar32 x = static_cast<UChar32>(c);
      all = all && (name == "isdigit"   ? u_isdigit(x)
                    : name == "isspace" ? IsPySpace(c)
                    : name == "isalpha" ? u_isalpha(x)
                                        : u_isalnum(x));
    }
    return Value(all);
  }
  *found = false;
  return Value();
}

absl::StatusOr<Value> DictMethod(const Value& d, std::string_view name, CallArgs& args,
                                 bool* found) {
  *found = true;
  if (name == "items" || name == "keys" || name == "values") {
    Array out;
    for (const auto& [k, v] : d.object()) {
      out.push_back(name == "items"  ? Value::FromArray({Value(k), v}, /*is_tuple=*/true)
                    : name == "keys" ? Value(k)
                                     : v);
    }
    return Value::FromArray(std::move(out));
  }
  if (name == "get") {
    const Value v = d.Get(Pos(args, 0).Str());
    return v.is_undefined() ? (args.positional.size() > 1 ? Pos(args, 1) : Value::None()) : v;
  }
  *found = false;
  return Value();
}

Object KeywordObject(const CallArgs& args) {
  Object o;
  if (Pos(args, 0).is_object()) o = Pos(args, 0).object();
  for (const auto& [k, v] : args.keyword) o.emplace_back(k, v);
  return o;
}

absl::StatusOr<Value> Range(CallArgs& args) {
  int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = Pos(args, 0).integer();
  } else if (args.positional.size() >= 2) {
    start = Pos(args, 0).integer();
    stop = Pos(args, 1).integer();
    if (args.positional.size() > 2) step = Pos(args, 2).integer();
  }
  if (step == 0) return absl::InvalidArgumentError("range() step must not be zero");
  Array out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value(i));
  return Value::FromArray(std::move(out));
}

}  // namespace

absl::StatusOr<Value> CallMethod(const Value& object, std::string_view name, CallArgs& args,
                                 bool* found) {
  *found = false;
  if (object.is_string()) return StringMethod(object.string(), name, args, found);
  if (object.is_object() && !object.is_namespace()) return DictMethod(object, name, args, found);
  return Value();
}

Object Globals() {
  Object g;
  g.emplace_back("range", Value::FromFunction(Range));
  g.emplace_back("namespace", Value::FromFunction([](CallArgs& args) -> absl::StatusOr<Value> {
                   return Value::FromObject(KeywordObject(args), /*is_namespace=*/true);
                 }));
  g.emplace_back("dict", Value::FromFunction([](CallArgs& args) -> absl::StatusOr<Value> {
                   return Value::FromObject(KeywordObject(args));
                 }));
  g.emplace_back(
      "raise_exception", Value::FromFunction([](CallArgs& args) -> absl::StatusOr<Value> {
        return absl::InvalidArgumentError(fmt::format("{}{}", kRaisedPrefix, Pos(args, 0).Str()));
      }));
  g.emplace_back("strftime_now", Value::FromFunction([](CallArgs& args) -> absl::StatusOr<Value> {
                   const std::time_t now =
                       std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
                   std::tm local{};
                   localtime_r(&now, &local);
                   char buf[256];
                   const size_t n =
                       std::strftime(buf, sizeof(buf), Pos(args, 0).Str().c_str(), &local);
                   return Value(std::string(buf, n));
                 }));
  return g;
}

}  // namespace kvtier::engine::jinja
