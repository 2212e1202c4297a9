// Typed reads of the fields of one JSON object (a Hugging Face config.json, generation_config.json
// or model.safetensors.index.json), each error naming the file and the field:
//   "models/x/config.json: field "hidden_size" must be a positive integer, got "64"".
// A field whose value is null counts as absent, as transformers treats it.
//
// Thread-safety: a JsonFields is immutable after construction; it refers to the path and JSON it
// was built from, which must outlive it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::engine {

// Reads and parses a whole JSON file: NotFound if it cannot be opened, InvalidArgument naming the
// file (and, from the parser, the line and column) if it is not JSON or not an object.
absl::StatusOr<nlohmann::json> ReadJsonObject(const std::string& path);

class JsonFields {
 public:
  JsonFields(const std::string& path, const nlohmann::json& json) : path_(path), json_(json) {}

  // InvalidArgument "<path>: <what>".
  absl::Status Error(const std::string& what) const;

  bool Has(const char* field) const;

  // A positive integer that fits in 32 bits; nullopt if absent.
  absl::StatusOr<std::optional<uint32_t>> OptionalCount(const char* field) const;
  absl::StatusOr<uint32_t> Count(const char* field) const;  // required
  // A non-negative integer that fits in 32 bits (token ids); nullopt if absent.
  absl::StatusOr<std::optional<uint32_t>> OptionalId(const char* field) const;
  // An integer or a list of integers (eos_token_id), each a token id; empty if absent.
  absl::StatusOr<std::vector<uint32_t>> IdList(const char* field) const;
  // A finite number; nullopt if absent.
  absl::StatusOr<std::optional<double>> OptionalNumber(const char* field) const;
  // A finite number > 0; required.
  absl::StatusOr<double> PositiveNumber(const char* field) const;
  absl::StatusOr<std::optional<bool>> OptionalBool(const char* field) const;
  // A non-empty string; nullopt if absent.
  absl::StatusOr<std::optional<std::string>> OptionalString(const char* field) const;
  absl::StatusOr<std::string> String(const char* field) const;  // required

  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return json_; }

 private:
  // The field's value, or nullptr when absent or null.
  const nlohmann::json* Find(const char* field) const;
  absl::Status Wrong(const char* field, const char* expected, const nlohmann::json& got) const;

  const std::string& path_;
  const nlohmann::json& json_;
};

}  // namespace kvtier::engine
