#include "tools/replay/model_config.h"

#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

namespace kvtier::replay {
namespace {

using Json = nlohmann::json;

// Reads the fields of one model file, each error naming the file and the field.
class FieldReader {
 public:
  FieldReader(const std::string& path, const Json& json) : path_(path), json_(json) {}

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(fmt::format("{}: {}", path_, what));
  }

  // A positive integer that fits in 32 bits; nullopt if the field is absent.
  absl::StatusOr<std::optional<uint32_t>> OptionalCount(const char* field) const {
    auto it = json_.find(field);
    if (it == json_.end()) return std::optional<uint32_t>();
    if (!it->is_number_integer() || it->get<int64_t>() <= 0 ||
        it->get<int64_t>() > std::numeric_limits<uint32_t>::max()) {
      return Error(
          fmt::format("field \"{}\" must be a positive integer, got {}", field, it->dump()));
    }
    return std::optional<uint32_t>(static_cast<uint32_t>(it->get<int64_t>()));
  }

  absl::StatusOr<uint32_t> Count(const char* field) const {
    KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> value, OptionalCount(field));
    if (!value) return Error(fmt::format("field \"{}\" is missing", field));
    return *value;
  }

  absl::StatusOr<std::string> String(const char* field) const {
    auto it = json_.find(field);
    if (it == json_.end()) return Error(fmt::format("field \"{}\" is missing", field));
    if (!it->is_string() || it->get<std::string>().empty()) {
      return Error(
          fmt::format("field \"{}\" must be a non-empty string, got {}", field, it->dump()));
    }
    return it->get<std::string>();
  }

 private:
  const std::string& path_;
  const Json& json_;
};

// torch_dtype as Hugging Face writes it -> bytes per element.
std::optional<uint32_t> DtypeBytes(const std::string& dtype) {
  if (dtype == "bfloat16" || dtype == "float16") return 2;
  if (dtype == "float32") return 4;
  if (dtype == "float8_e4m3fn" || dtype == "float8_e5m2") return 1;
  return std::nullopt;
}

// head_dim is written explicitly by newer configs; older ones (Qwen2.5, Llama 2) imply it as
// hidden_size / num_attention_heads.
absl::StatusOr<uint32_t> HeadDim(const FieldReader& reader, std::optional<uint32_t> heads) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> head_dim, reader.OptionalCount("head_dim"));
  if (head_dim) return *head_dim;
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> hidden, reader.OptionalCount("hidden_size"));
  if (!hidden || !heads) {
    return reader.Error(
        "field \"head_dim\" is missing, and so is \"hidden_size\" or \"num_attention_heads\" to "
        "derive it from");
  }
  if (*hidden % *heads != 0) {
    return reader.Error(
        fmt::format("field \"hidden_size\" {} is not a multiple of \"num_attention_heads\" {}; "
                    "give \"head_dim\"",
                    *hidden, *heads));
  }
  return *hidden / *heads;
}

absl::StatusOr<ModelShape> ReadShape(const FieldReader& reader) {
  ModelShape shape;
  KVTIER_ASSIGN_OR_RETURN(shape.name, reader.String("name"));
  KVTIER_ASSIGN_OR_RETURN(shape.layers, reader.Count("num_hidden_layers"));
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> heads,
                          reader.OptionalCount("num_attention_heads"));
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> kv_heads,
                          reader.OptionalCount("num_key_value_heads"));
  if (!kv_heads && !heads) return reader.Error("field \"num_key_value_heads\" is missing");
  shape.kv_heads = kv_heads ? *kv_heads : *heads;  // no num_key_value_heads: plain multi-head
  if (heads && *heads % shape.kv_heads != 0) {
    return reader.Error(fmt::format(
        "field \"num_attention_heads\" {} is not a multiple of \"num_key_value_heads\" {}", *heads,
        shape.kv_heads));
  }
  KVTIER_ASSIGN_OR_RETURN(shape.head_dim, HeadDim(reader, heads));
  KVTIER_ASSIGN_OR_RETURN(std::string dtype, reader.String("torch_dtype"));
  std::optional<uint32_t> bytes = DtypeBytes(dtype);
  if (!bytes) {
    return reader.Error(fmt::format(
        "field \"torch_dtype\" is \"{}\"; expected bfloat16, float16, float32, float8_e4m3fn or "
        "float8_e5m2",
        dtype));
  }
  shape.dtype_bytes = *bytes;
  return shape;
}

}  // namespace

uint64_t ModelShape::KvBytesPerToken() const {
  return uint64_t{2} * layers * kv_heads * head_dim * dtype_bytes;
}

absl::StatusOr<ModelShape> LoadModelShape(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("cannot open model file {}", path));
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
  return ReadShape(FieldReader(path, json));
}

}  // namespace kvtier::replay
