#include "engine/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "fmt/format.h"

namespace kvtier::engine::jinja {

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double f) : kind_(Kind::kFloat), f_(f) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}

Value Value::FromArray(Array a, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kArray;
  v.is_tuple_ = is_tuple;
  v.a_ = std::make_shared<Array>(std::move(a));
  return v;
}

Value Value::FromObject(Object o, bool is_namespace) {
  Value v;
  v.kind_ = Kind::kObject;
  v.o_ = std::make_shared<Object>(std::move(o));
  v.is_namespace_ = is_namespace;
  return v;
}

Value Value::FromFunction(Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& item : j) a.push_back(FromJson(item));
      return FromArray(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [k, item] : j.items()) o.emplace_back(k, FromJson(item));
      return FromObject(std::move(o));
    }
    default:
      return Value();
  }
}

Value Value::Get(std::string_view key) const {
  if (kind_ != Kind::kObject) return Value();
  for (const auto& [k, v] : *o_) {
    if (k == key) return v;
  }
  return Value();
}

void Value::Set(const std::string& key, Value v) const {
  for (auto& [k, existing] : *o_) {
    if (k == key) {
      existing = std::move(v);
      return;
    }
  }
  o_->emplace_back(key, std::move(v));
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !s_.empty();
    case Kind::kArray:
      return !a_->empty();
    case Kind::kObject:
      return !o_->empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

bool Value::Equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::kInt && other.kind_ == Kind::kInt) return i_ == other.i_;
    return number() == other.number();
  }
  // Python: True == 1; keep it simple and exact for same kinds.
  if (kind_ == Kind::kBool && other.is_number()) return Value(int64_t{b_}).Equals(other);
  if (other.kind_ == Kind::kBool && is_number()) return other.Equals(*this);
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return b_ == other.b_;
    case Kind::kString:
      return s_ == other.s_;
    case Kind::kArray:
      return std::equal(a_->begin(), a_->end(), other.a_->begin(), other.a_->end(),
                        [](const Value& x, const Value& y) { return x.Equals(y); });
    case Kind::kObject: {
      if (o_->size() != other.o_->size()) return false;
      for (const auto& [k, v] : *o_) {
        const Value w = other.Get(k);
        if (w.is_undefined() || !v.Equals(w)) return false;
      }
      return true;
    }
    case Kind::kFunction:
      return fn_ == other.fn_;
    default:
      return false;
  }
}

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |f| < 1e16.
  const auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] >= '0' && sci[i] <= '9') digits.push_back(sci[i]);
  }
  const std::string sign = f < 0 ? "-" : "";
  if (exp < -4 || exp >= 16) {
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1) mant += "." + digits.substr(1);
    return fmt::format("{}{}e{}{:02d}", sign, mant, exp < 0 ? '-' : '+', std::abs(exp));
  }
  if (exp < 0) return sign + "0." + std::string(-exp - 1, '0') + digits;
  if (digits.size() <= static_cast<size_t>(exp) + 1) {
    return sign + digits + std::string(exp + 1 - digits.size(), '0') + ".0";
  }
  return sign + digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
}

namespace {

std::string ReprString(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = dq ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + quote;
}

}  // namespace

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return s_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return FloatRepr(f_);
    case Kind::kString:
      return ReprString(s_);
    case Kind::kArray: {
      std::string out = is_tuple_ ? "(" : "[";
      for (size_t i = 0; i < a_->size(); ++i) out += (i ? ", " : "") + (*a_)[i].Repr();
      if (is_tuple_ && a_->size() == 1) out += ",";
      return out + (is_tuple_ ? ")" : "]");
    }
    case Kind::kObject: {
      std::string out = is_namespace_ ? "<Namespace {" : "{";
      for (size_t i = 0; i < o_->size(); ++i) {
        out += (i ? ", " : "") + ReprString((*o_)[i].first) + ": " + (*o_)[i].second.Repr();
      }
      return out + (is_namespace_ ? "}>" : "}");
    }
    case Kind::kFunction:
      return "<function>";
  }
  return "";
}

std::string_view Value::TypeName() const {
  static constexpr std::string_view kNames[] = {"undefined", "NoneType", "bool", "int",     "float",
                                                "str",       "list",     "dict", "function"};
  return kNames[static_cast<int>(kind_)];
}

}  // namespace kvtier::engine::jinja
