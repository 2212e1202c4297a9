// The values a chat template computes with, with Python's semantics where templates can see them
// (Jinja runs on Python): truthiness, ==, str() and repr() of lists and dicts, json.dumps as
// transformers' `tojson` filter calls it. Lists and dicts are shared by reference, as in Python, so
// `set ns.x = ...` on a namespace() is seen by every holder of it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "nlohmann/json.hpp"

namespace kvtier::engine::jinja {

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // insertion-ordered, like a dict

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<absl::StatusOr<Value>(CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  static Value None();
  Value(bool b);                                           // NOLINT: implicit, as literals are
  Value(int64_t i);                                        // NOLINT
  Value(double f);                                         // NOLINT
  Value(std::string s);                                    // NOLINT
  Value(const char* s) : Value(std::string(s)) {}          // NOLINT
  static Value FromArray(Array a, bool is_tuple = false);  // a tuple prints as (a, b)
  static Value FromObject(Object o, bool is_namespace = false);
  static Value FromFunction(Function f);
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_namespace() const { return is_namespace_; }

  bool boolean() const { return b_; }
  int64_t integer() const { return i_; }
  double number() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : f_; }
  const std::string& string() const { return s_; }
  Array& array() const { return *a_; }
  Object& object() const { return *o_; }
  const Function& function() const { return *fn_; }

  // The value of `key` in a dict, or undefined.
  Value Get(std::string_view key) const;
  // Sets `key` in a dict (replacing or appending).
  void Set(const std::string& key, Value v) const;

  bool Truthy() const;
  // Python's ==.
  bool Equals(const Value& other) const;
  // Python's str(): strings as they are, None as "None", lists and dicts as repr().
  std::string Str() const;
  // Python's repr().
  std::string Repr() const;
  // json.dumps(self, ensure_ascii=false, indent=indent (< 0: none), separators, sort_keys).
  absl::StatusOr<std::string> ToJson(int indent, std::string_view item_sep,
                                     std::string_view key_sep, bool sort_keys,
                                     bool ensure_ascii) const;
  // A name for error messages: "string", "list", "dict", ...
  std::string_view TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool is_namespace_ = false;
  bool is_tuple_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<Function> fn_;
};

// Python's repr() of a float: the shortest text that reads back, with ".0" for whole numbers.
std::string FloatRepr(double f);

}  // namespace kvtier::engine::jinja
