// Value::ToJson: Python's json.dumps, which transformers' `tojson` filter calls with
// ensure_ascii=False (so non-ASCII text is kept and only '"', '\\' and control characters are
// escaped) and, without indent, the separators ", " and ": ".
#include <algorithm>
#include <cmath>

#include "engine/jinja_value.h"
#include "engine/utf8.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja {
namespace {

struct JsonStyle {
  int indent;
  std::string_view item_sep, key_sep;
  bool sort_keys, ensure_ascii;
};

void AppendJsonString(const std::string& s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    const auto c = static_cast<unsigned char>(s[pos]);
    if (c >= 0x80) {
      const size_t begin = pos;
      if (ValidSequenceLength(std::string_view(s).substr(pos)) == 0) {
        ++pos;  // not UTF-8: Python strings cannot hold it; keep the byte
        out->push_back(static_cast<char>(c));
        continue;
      }
      const char32_t cp = NextCodePoint(s, &pos);
      if (!ensure_ascii) {
        out->append(s, begin, pos - begin);
      } else if (cp < 0x10000) {
        *out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
      } else {
        const uint32_t v = cp - 0x10000;
        *out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      }
      continue;
    }
    ++pos;
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
          *out += fmt::format("\\u{:04x}", c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

absl::Status AppendJson(const Value& v, const JsonStyle& style, int depth, std::string* out);

// Opens a container's next line: a newline and the indent of `depth` (nothing without indent).
void NewLine(const JsonStyle& style, int depth, std::string* out) {
  if (style.indent < 0) return;
  out->push_back('\n');
  out->append(static_cast<size_t>(style.indent) * depth, ' ');
}

absl::Status AppendArray(const Array& a, const JsonStyle& style, int depth, std::string* out) {
  if (a.empty()) return out->append("[]"), absl::OkStatus();
  out->push_back('[');
  for (size_t i = 0; i < a.size(); ++i) {
    if (i > 0) out->append(style.item_sep);
    NewLine(style, depth + 1, out);
    KVTIER_RETURN_IF_ERROR(AppendJson(a[i], style, depth + 1, out));
  }
  NewLine(style, depth, out);
  out->push_back(']');
  return absl::OkStatus();
}

absl::Status AppendObject(const Object& o, const JsonStyle& style, int depth, std::string* out) {
  if (o.empty()) return out->append("{}"), absl::OkStatus();
  std::vector<const std::pair<std::string, Value>*> items;
  for (const auto& item : o) items.push_back(&item);
  if (style.sort_keys) {
    std::stable_sort(items.begin(), items.end(),
                     [](const auto* x, const auto* y) { return x->first < y->first; });
  }
  out->push_back('{');
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out->append(style.item_sep);
    NewLine(style, depth + 1, out);
    AppendJsonString(items[i]->first, style.ensure_ascii, out);
    out->append(style.key_sep);
    KVTIER_RETURN_IF_ERROR(AppendJson(items[i]->second, style, depth + 1, out));
  }
  NewLine(style, depth, out);
  out->push_back('}');
  return absl::OkStatus();
}

absl::Status AppendJson(const Value& v, const JsonStyle& style, int depth, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      out->append("null");
      return absl::OkStatus();
    case Value::Kind::kBool:
      out->append(v.boolean() ? "true" : "false");
      return absl::OkStatus();
    case Value::Kind::kInt:
      out->append(std::to_string(v.integer()));
      return absl::OkStatus();
    case Value::Kind::kFloat: {
      const double f = v.number();
      out->append(std::isnan(f)   ? "NaN"
                  : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity")
                                  : FloatRepr(f));
      return absl::OkStatus();
    }
    case Value::Kind::kString:
      AppendJsonString(v.string(), style.ensure_ascii, out);
      return absl::OkStatus();
    case Value::Kind::kArray:
      return AppendArray(v.array(), style, depth, out);
    case Value::Kind::kObject:
      return AppendObject(v.object(), style, depth, out);
    default:
      return absl::InvalidArgumentError(
          fmt::format("Object of type {} is not JSON serializable", v.TypeName()));
  }
}

}  // namespace

absl::StatusOr<std::string> Value::ToJson(int indent, std::string_view item_sep,
                                          std::string_view key_sep, bool sort_keys,
                                          bool ensure_ascii) const {
  std::string out;
  KVTIER_RETURN_IF_ERROR(
      AppendJson(*this, JsonStyle{indent, item_sep, key_sep, sort_keys, ensure_ascii}, 0, &out));
  return out;
}

}  // namespace kvtier::engine::jinja
