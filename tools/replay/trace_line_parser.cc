#include "tools/replay/trace_line_parser.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>
#include <string>

namespace kvtier::replay {

namespace od = simdjson::ondemand;

static_assert(simdjson::SIMDJSON_PADDING <= 64,
              "LineReader::kLinePadding must cover SIMDJSON_PADDING");

struct TraceLineParser::Impl {
  od::parser parser;
};

namespace {

absl::Status NotJson(simdjson::error_code error) {
  return absl::InvalidArgumentError(
      fmt::format("not valid JSON ({})", simdjson::error_message(error)));
}

// The value's text as written, for messages; does not consume the value.
std::string Token(od::value& value) {
  std::string_view token = value.raw_json_token();
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t' || token.back() == '\r')) {
    token.remove_suffix(1);
  }
  if (token.size() > 40) return fmt::format("{}...", token.substr(0, 40));
  return std::string(token);
}

absl::Status WrongType(std::string_view field, std::string_view want, od::value& value) {
  return absl::InvalidArgumentError(
      fmt::format("\"{}\" must be {}, got {}", field, want, Token(value)));
}

absl::Status ReadCount(od::value& value, std::string_view field, uint64_t* out) {
  if (value.get_uint64().get(*out) == simdjson::SUCCESS) return absl::OkStatus();
  return WrongType(field, "a non-negative integer", value);
}

absl::Status ReadTimestamp(od::value& value, double* out) {
  if (value.get_double().get(*out) == simdjson::SUCCESS && std::isfinite(*out) && *out >= 0) {
    return absl::OkStatus();
  }
  return WrongType("timestamp", "a non-negative number", value);
}

absl::Status CheckInteger(od::value& value, std::string_view field) {
  int64_t unused;
  if (value.get_int64().get(unused) == simdjson::SUCCESS) return absl::OkStatus();
  return WrongType(field, "an integer", value);
}

absl::Status CheckString(od::value& value, std::string_view field) {
  std::string_view unused;
  if (value.get_string().get(unused) == simdjson::SUCCESS) return absl::OkStatus();
  return WrongType(field, "a string", value);
}

// The hot loop: every block reference of the trace goes through here.
absl::Status ReadHashIds(od::value& value, std::vector<uint64_t>* out) {
  out->clear();
  od::array array;
  if (value.get_array().get(array) != simdjson::SUCCESS) {
    return WrongType("hash_ids", "an array of non-negative integers", value);
  }
  for (simdjson::simdjson_result<od::value> element : array) {
    od::value id_value;
    if (simdjson::error_code e = element.get(id_value)) return NotJson(e);
    uint64_t id;
    if (id_value.get_uint64().get(id) != simdjson::SUCCESS) {
      return WrongType(fmt::format("hash_ids[{}]", out->size()), "a non-negative integer",
                       id_value);
    }
    out->push_back(id);
  }
  return absl::OkStatus();
}

absl::Status ReadField(od::field& field, TraceLine* out) {
  od::raw_json_string key = field.key();
  od::value& value = field.value();
  if (key.unsafe_is_equal("hash_ids")) {
    out->has_hash_ids = true;
    return ReadHashIds(value, &out->hash_ids);
  }
  if (key.unsafe_is_equal("input_length")) {
    out->has_input_length = true;
    return ReadCount(value, "input_length", &out->input_length);
  }
  if (key.unsafe_is_equal("output_length")) {
    out->has_output_length = true;
    return ReadCount(value, "output_length", &out->output_length);
  }
  if (key.unsafe_is_equal("timestamp")) {
    out->has_timestamp = true;
    return ReadTimestamp(value, &out->timestamp);
  }
  if (key.unsafe_is_equal("chat_id")) {
    out->has_chat_id = true;
    return CheckInteger(value, "chat_id");
  }
  if (key.unsafe_is_equal("parent_chat_id")) return CheckInteger(value, "parent_chat_id");
  if (key.unsafe_is_equal("turn")) return CheckInteger(value, "turn");
  if (key.unsafe_is_equal("type")) return CheckString(value, "type");
  return absl::OkStatus();  // unknown fields are skipped unread
}

}  // namespace

TraceLineParser::TraceLineParser() : impl_(std::make_unique<Impl>()) {}
TraceLineParser::~TraceLineParser() = default;

absl::Status TraceLineParser::Parse(std::string_view line, TraceLine* out) {
  std::vector<uint64_t> ids = std::move(out->hash_ids);
  *out = TraceLine{};
  out->hash_ids = std::move(ids);
  out->hash_ids.clear();

  od::document doc;
  if (simdjson::error_code e =
          impl_->parser.iterate(line.data(), line.size(), line.size() + simdjson::SIMDJSON_PADDING)
              .get(doc)) {
    return NotJson(e);
  }
  od::object object;
  if (simdjson::error_code e = doc.get_object().get(object)) {
    if (e == simdjson::INCORRECT_TYPE) {  // a scalar, an array, or text that is not JSON at all
      std::string_view start = line.substr(0, 40);
      return absl::InvalidArgumentError(
          fmt::format("not a JSON object: {}{}", start, line.size() > 40 ? "..." : ""));
    }
    return NotJson(e);
  }
  for (simdjson::simdjson_result<od::field> result : object) {
    od::field field;
    if (simdjson::error_code e = std::move(result).get(field)) return NotJson(e);
    KVTIER_RETURN_IF_ERROR(ReadField(field, out));
  }
  // Past the object, the only token left must be the end of the input.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    return absl::InvalidArgumentError("not valid JSON (unexpected text after the object)");
  }
  return absl::OkStatus();
}

}  // namespace kvtier::replay
