#include "engine/json_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace kvtier::engine {

using Json = nlohmann::json;

absl::StatusOr<Json> ReadJsonObject(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("cannot open {}", path));
  std::stringstream text;
  text << in.rdbuf();
  Json json;
  try {
    json = Json::parse(text.str());
  } catch (const Json::parse_error& e) {  // e.what() names the line and column
    return absl::InvalidArgumentError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(fmt::format("{}: expected a JSON object", path));
  }
  return json;
}

absl::Status JsonFields::Error(const std::string& what) const {
  return absl::InvalidArgumentError(fmt::format("{}: {}", path_, what));
}

const Json* JsonFields::Find(const char* field) const {
  auto it = json_.find(field);
  if (it == json_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::Has(const char* field) const { return Find(field) != nullptr; }

absl::Status JsonFields::Wrong(const char* field, const char* expected, const Json& got) const {
  return Error(fmt::format("field \"{}\" must be {}, got {}", field, expected, got.dump()));
}

absl::StatusOr<std::optional<uint32_t>> JsonFields::OptionalCount(const char* field) const {
  const Json* value = Find(field);
  if (value == nullptr) return std::optional<uint32_t>();
  if (!value->is_number_integer() || value->get<int64_t>() <= 0 ||
      value->get<int64_t>() > std::numeric_limits<uint32_t>::max()) {
    return Wrong(field, "a positive integer", *value);
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(value->get<int64_t>()));
}

absl::StatusOr<uint32_t> JsonFields::Count(const char* field) const {
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> value, OptionalCount(field));
  if (!value) return Error(fmt::format("field \"{}\" is missing", field));
  return *value;
}

namespace {

bool IsId(const Json& value) {
  return value.is_number_integer() && value.get<int64_t>() >= 0 &&
         value.get<int64_t>() <= std::numeric_limits<uint32_t>::max();
}

}  // namespace

absl::StatusOr<std::optional<uint32_t>> JsonFields::OptionalId(const char* field) const {
  const Json* value = Find(field);
  if (value == nullptr) return std::optional<uint32_t>();
  if (!IsId(*value)) return Wrong(field, "a token id (an integer >= 0)", *value);
  return std::optional<uint32_t>(static_cast<uint32_t>(value->get<int64_t>()));
}

absl::StatusOr<std::vector<uint32_t>> JsonFields::IdList(const char* field) const {
  const Json* value = Find(field);
  std::vector<uint32_t> ids;
  if (value == nullptr) return ids;
  if (IsId(*value)) return std::vector<uint32_t>{static_cast<uint32_t>(value->get<int64_t>())};
  if (!value->is_array()) return Wrong(field, "a token id or a list of token ids", *value);
  for (const Json& item : *value) {
    if (!IsId(item)) return Wrong(field, "a token id or a list of token ids", *value);
    ids.push_back(static_cast<uint32_t>(item.get<int64_t>()));
  }
  return ids;
}

absl::StatusOr<std::optional<double>> JsonFields::OptionalNumber(const char* field) const {
  const Json* value = Find(field);
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number() || !std::isfinite(value->get<double>())) {
    return Wrong(field, "a number", *value);
  }
  return std::optional<double>(value->get<double>());
}

absl::StatusOr<double> JsonFields::PositiveNumber(const char* field) const {
  KVTIER_ASSIGN_OR_RETURN(std::optional<double> value, OptionalNumber(field));
  if (!value) return Error(fmt::format("field \"{}\" is missing", field));
  if (*value <= 0) return Wrong(field, "a number > 0", *Find(field));
  return *value;
}

absl::StatusOr<std::optional<bool>> JsonFields::OptionalBool(const char* field) const {
  const Json* value = Find(field);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) return Wrong(field, "true or false", *value);
  return std::optional<bool>(value->get<bool>());
}

absl::StatusOr<std::optional<std::string>> JsonFields::OptionalString(const char* field) const {
  const Json* value = Find(field);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string() || value->get<std::string>().empty()) {
    return Wrong(field, "a non-empty string", *value);
  }
  return std::optional<std::string>(value->get<std::string>());
}

absl::StatusOr<std::string> JsonFields::String(const char* field) const {
  KVTIER_ASSIGN_OR_RETURN(std::optional<std::string> value, OptionalString(field));
  if (!value) return Error(fmt::format("field \"{}\" is missing", field));
  return *value;
}

}  // namespace kvtier::engine
