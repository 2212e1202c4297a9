// Checkpoint: a model directory's safetensors, one file or shards named by the index.
#include <fmt/format.h>

#include <filesystem>

#include "engine/json_fields.h"
#include "engine/safetensors.h"

namespace kvtier::engine {
namespace {

namespace fs = std::filesystem;

// A shard's name from the index: a plain file name in the model directory, never a path that
// could reach outside it.
absl::Status CheckShardName(const std::string& index, const std::string& tensor,
                            const nlohmann::json& file) {
  if (!file.is_string() || file.get<std::string>().empty() ||
      file.get<std::string>().find('/') != std::string::npos || file.get<std::string>() == "." ||
      file.get<std::string>() == "..") {
    return absl::InvalidArgumentError(fmt::format(
        "{}: \"weight_map\" maps tensor \"{}\" to {}; expected a file name in the model directory",
        index, tensor, file.dump()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Checkpoint> Checkpoint::Open(const std::string& dir) {
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    ckpt.source_ = index_path.string();
    KVTIER_RETURN_IF_ERROR(ckpt.OpenShards());
    return ckpt;
  }
  if (!fs::exists(single_path, ec)) {
    return absl::NotFoundError(
        fmt::format("{}: no model.safetensors or model.safetensors.index.json", dir));
  }
  ckpt.source_ = single_path.string();
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                          SafetensorsFile::Open(ckpt.source_));
  for (const auto& [name, view] : file->tensors()) ckpt.tensors_.emplace(name, &view);
  ckpt.files_.push_back(std::move(file));
  return ckpt;
}

absl::Status Checkpoint::OpenShards() {
  KVTIER_ASSIGN_OR_RETURN(nlohmann::json json, ReadJsonObject(source_));
  auto map = json.find("weight_map");
  if (map == json.end() || !map->is_object() || map->empty()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: field \"weight_map\" is missing, empty or not an object", source_));
  }
  std::map<std::string, SafetensorsFile*> shards;
  for (const auto& [tensor, file] : map->items()) {
    KVTIER_RETURN_IF_ERROR(CheckShardName(source_, tensor, file));
    const std::string name = file.get<std::string>();
    if (!shards.contains(name)) {
      KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> shard,
                              SafetensorsFile::Open((fs::path(dir_) / name).string()));
      shards[name] = shard.get();
      files_.push_back(std::move(shard));
    }
    auto it = shards[name]->tensors().find(tensor);
    if (it == shards[name]->tensors().end()) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: tensor \"{}\" is mapped to {}, which does not hold it", source_, tensor, name));
    }
    tensors_.emplace(tensor, &it->second);
  }
  return absl::OkStatus();
}

absl::StatusOr<const TensorView*> Checkpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(fmt::format("{}: tensor \"{}\" is missing", source_, name));
  }
  return it->second;
}

}  // namespace kvtier::engine
