#include "engine/tokenizer_config.h"

#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace kvtier::engine {
namespace {

using nlohmann::json;

absl::StatusOr<json> ReadJson(const std::filesystem::path& path) {
  KVTIER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(fmt::format("{}: not a JSON object", path.string()));
  }
  return j;
}

// A special token is written as a string, null, or an AddedToken object {"content": ...}.
absl::StatusOr<std::optional<std::string>> TokenText(const json& config, const char* key,
                                                     const std::filesystem::path& path) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return absl::InvalidArgumentError(fmt::format(
      "{}: \"{}\" must be a string, null or an object with \"content\"", path.string(), key));
}

absl::StatusOr<std::string> ChatTemplate(const json& config, const std::filesystem::path& path) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const json& named : *it) {
      if (named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string()) {
        return named["template"].get<std::string>();
      }
    }
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: \"chat_template\" must be a string or a list holding a \"default\" template",
                  path.string()));
}

// generation_config.json's `key`: an id, a list of ids, or absent/null.
absl::StatusOr<std::vector<uint32_t>> Ids(const json& config, const char* key,
                                          const std::filesystem::path& path) {
  const auto it = config.find(key);
  std::vector<uint32_t> ids;
  if (it == config.end() || it->is_null()) return ids;
  const json list = it->is_array() ? *it : json::array({*it});
  for (const json& id : list) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > UINT32_MAX) {
      return absl::InvalidArgumentError(
          fmt::format("{}: \"{}\" must be a token id or a list of them", path.string(), key));
    }
    ids.push_back(id.get<uint32_t>());
  }
  return ids;
}

absl::Status ReadGenerationConfig(const std::filesystem::path& path, TokenizerConfig* out) {
  KVTIER_ASSIGN_OR_RETURN(json config, ReadJson(path));
  KVTIER_ASSIGN_OR_RETURN(out->eos_token_ids, Ids(config, "eos_token_id", path));
  KVTIER_ASSIGN_OR_RETURN(std::vector<uint32_t> bos, Ids(config, "bos_token_id", path));
  KVTIER_ASSIGN_OR_RETURN(std::vector<uint32_t> pad, Ids(config, "pad_token_id", path));
  if (!bos.empty()) out->bos_token_id = bos[0];
  if (!pad.empty()) out->pad_token_id = pad[0];
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(fmt::format("{}: read failed", path.string()));
  return text.str();
}

absl::StatusOr<TokenizerConfig> LoadTokenizerConfig(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tokenizer_config.json";
  KVTIER_ASSIGN_OR_RETURN(json config, ReadJson(path));
  TokenizerConfig out;
  KVTIER_ASSIGN_OR_RETURN(out.bos_token, TokenText(config, "bos_token", path));
  KVTIER_ASSIGN_OR_RETURN(out.eos_token, TokenText(config, "eos_token", path));
  KVTIER_ASSIGN_OR_RETURN(out.pad_token, TokenText(config, "pad_token", path));
  KVTIER_ASSIGN_OR_RETURN(out.unk_token, TokenText(config, "unk_token", path));
  KVTIER_ASSIGN_OR_RETURN(out.chat_template, ChatTemplate(config, path));
  if (std::filesystem::exists(dir / "chat_template.jinja")) {
    KVTIER_ASSIGN_OR_RETURN(out.chat_template, ReadFile(dir / "chat_template.jinja"));
  }
  if (std::filesystem::exists(dir / "generation_config.json")) {
    KVTIER_RETURN_IF_ERROR(ReadGenerationConfig(dir / "generation_config.json", &out));
  }
  return out;
}

}  // namespace kvtier::engine
