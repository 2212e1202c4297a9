// The filters, tests, methods and global functions chat templates call, with Jinja's (and, for
// methods, Python's) behaviour: strings are indexed, sliced and measured in code points; strip
// and split use Python's whitespace; tojson is transformers' json.dumps(ensure_ascii=False).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "engine/jinja_value.h"

namespace kvtier::engine::jinja {

// `value | name(args)`. NotFound for an unknown filter.
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& value, CallArgs& args);

// `value is name(args)`. NotFound for an unknown test.
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& value,
                               const std::vector<Value>& args);

// `object.name(args)` for str, dict and list methods; *found is false when there is no such method.
absl::StatusOr<Value> CallMethod(const Value& object, std::string_view name, CallArgs& args,
                                 bool* found);

// range, namespace, dict, raise_exception (an error whose message is the argument) and
// strftime_now (the local time, formatted as by Python's strftime).
Object Globals();

// Python's s[start:stop:step] and len(s) for strings (code points) and lists.
absl::StatusOr<Value> Slice(const Value& v, const Value& start, const Value& stop,
                            const Value& step);
int64_t Length(const Value& v);

// The string prefix every raise_exception() error message carries, so callers can tell a
// template's own refusal from a template bug.
inline constexpr std::string_view kRaisedPrefix = "template raised: ";

}  // namespace kvtier::engine::jinja

namespace kvtier::engine::jinja {

// Python's ordering of two numbers or two strings (-1, 0, 1); an error for other pairs.
absl::StatusOr<int> Compare(const Value& a, const Value& b);

// Python's `needle in haystack` for strings (substring), lists (an equal item) and dicts (a key).
absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle);

// The items a for loop visits: a list's items, a dict's keys, a string's characters.
absl::StatusOr<Array> Iterate(const Value& v);

}  // namespace kvtier::engine::jinja
