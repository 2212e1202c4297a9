#include "engine/model_config.h"

#include <fmt/format.h>

#include <array>
#include <filesystem>

#include "engine/json_fields.h"
#include "engine/rope_config.h"

namespace kvtier::engine {
namespace {

using Json = nlohmann::json;

struct ArchitectureInfo {
  Architecture architecture;
  std::string_view name;        // config.json "architectures"
  std::string_view model_type;  // config.json "model_type"
};

constexpr std::array<ArchitectureInfo, 4> kArchitectures = {{
    {Architecture::kLlama, "LlamaForCausalLM", "llama"},
    {Architecture::kQwen2, "Qwen2ForCausalLM", "qwen2"},
    {Architecture::kQwen3, "Qwen3ForCausalLM", "qwen3"},
    {Architecture::kMistral, "MistralForCausalLM", "mistral"},
}};

const ArchitectureInfo& InfoOf(Architecture architecture) {
  for (const ArchitectureInfo& info : kArchitectures) {
    if (info.architecture == architecture) return info;
  }
  return kArchitectures[0];  // unreachable: every enumerator is in the table
}

absl::StatusOr<Architecture> ReadArchitecture(const JsonFields& f) {
  const Json* list = f.Has("architectures") ? &f.json()["architectures"] : nullptr;
  if (list == nullptr) return f.Error("field \"architectures\" is missing");
  if (!list->is_array() || list->size() != 1 || !(*list)[0].is_string()) {
    return f.Error(
        fmt::format("field \"architectures\" must be a list of one name, got {}", list->dump()));
  }
  const std::string name = (*list)[0].get<std::string>();
  for (const ArchitectureInfo& info : kArchitectures) {
    if (name != info.name) continue;
    KVTIER_ASSIGN_OR_RETURN(std::optional<std::string> type, f.OptionalString("model_type"));
    if (type && *type != info.model_type) {
      return f.Error(
          fmt::format("field \"model_type\" is \"{}\" but \"architectures\" is {} (\"{}\")", *type,
                      name, info.model_type));
    }
    return info.architecture;
  }
  return f.Error(fmt::format(
      "architecture \"{}\" is not supported; expected LlamaForCausalLM, Qwen2ForCausalLM, "
      "Qwen3ForCausalLM or MistralForCausalLM",
      name));
}

absl::StatusOr<WeightDtype> ParseDtype(const JsonFields& f, const char* field,
                                       const std::string& dtype) {
  if (dtype == "bfloat16") return WeightDtype::kBFloat16;
  if (dtype == "float16") return WeightDtype::kFloat16;
  if (dtype == "float32") return WeightDtype::kFloat32;
  return f.Error(
      fmt::format("field \"{}\" is \"{}\"; expected bfloat16, float16 or float32", field, dtype));
}

// transformers 5 writes "dtype", 4.x "torch_dtype"; a file with both must agree.
absl::StatusOr<WeightDtype> ReadDtype(const JsonFields& f) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<std::string> dtype, f.OptionalString("dtype"));
  KVTIER_ASSIGN_OR_RETURN(std::optional<std::string> torch_dtype, f.OptionalString("torch_dtype"));
  if (dtype && torch_dtype && *dtype != *torch_dtype) {
    return f.Error(fmt::format("field \"dtype\" is \"{}\" but \"torch_dtype\" is \"{}\"", *dtype,
                               *torch_dtype));
  }
  if (dtype) return ParseDtype(f, "dtype", *dtype);
  if (torch_dtype) return ParseDtype(f, "torch_dtype", *torch_dtype);
  return f.Error("field \"torch_dtype\" is missing (nor is there \"dtype\")");
}

// head_dim is explicit in newer configs (and may differ from hidden_size / num_attention_heads,
// as in Qwen3); older ones imply it.
absl::StatusOr<uint32_t> ReadHeadDim(const JsonFields& f, uint32_t hidden, uint32_t heads) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> head_dim, f.OptionalCount("head_dim"));
  if (!head_dim) {
    if (hidden % heads != 0) {
      return f.Error(
          fmt::format("field \"hidden_size\" {} is not a multiple of \"num_attention_heads\" {}; "
                      "give \"head_dim\"",
                      hidden, heads));
    }
    head_dim = hidden / heads;
  }
  if (*head_dim % 2 != 0) {
    return f.Error(fmt::format("field \"head_dim\" is {}; RoPE needs an even head_dim", *head_dim));
  }
  return *head_dim;
}

absl::Status ReadSizes(const JsonFields& f, ModelConfig* c) {
  KVTIER_ASSIGN_OR_RETURN(c->vocab_size, f.Count("vocab_size"));
  KVTIER_ASSIGN_OR_RETURN(c->hidden_size, f.Count("hidden_size"));
  KVTIER_ASSIGN_OR_RETURN(c->intermediate_size, f.Count("intermediate_size"));
  KVTIER_ASSIGN_OR_RETURN(c->num_layers, f.Count("num_hidden_layers"));
  KVTIER_ASSIGN_OR_RETURN(c->num_heads, f.Count("num_attention_heads"));
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> kv_heads, f.OptionalCount("num_key_value_heads"));
  c->num_kv_heads = kv_heads ? *kv_heads : c->num_heads;  // absent: plain multi-head attention
  if (c->num_heads % c->num_kv_heads != 0) {
    return f.Error(fmt::format(
        "field \"num_attention_heads\" {} is not a multiple of \"num_key_value_heads\" {}",
        c->num_heads, c->num_kv_heads));
  }
  KVTIER_ASSIGN_OR_RETURN(c->head_dim, ReadHeadDim(f, c->hidden_size, c->num_heads));
  KVTIER_ASSIGN_OR_RETURN(c->max_position_embeddings, f.Count("max_position_embeddings"));
  KVTIER_ASSIGN_OR_RETURN(c->rms_norm_eps, f.PositiveNumber("rms_norm_eps"));
  KVTIER_ASSIGN_OR_RETURN(std::optional<std::string> act, f.OptionalString("hidden_act"));
  if (act && *act != "silu") {
    return f.Error(fmt::format("field \"hidden_act\" is \"{}\"; only \"silu\" is supported", *act));
  }
  return absl::OkStatus();
}

// transformers 5 lists each layer's attention type; only full attention, or sliding attention
// where the architecture has a window (Mistral), is supported.
absl::Status CheckLayerTypes(const JsonFields& f, const ModelConfig& c) {
  if (!f.Has("layer_types")) return absl::OkStatus();
  const Json& types = f.json()["layer_types"];
  for (size_t i = 0; types.is_array() && i < types.size(); ++i) {
    if (types[i] != "full_attention" && types[i] != "sliding_attention") {
      return f.Error(
          fmt::format("field \"layer_types\"[{}] is {}; not supported", i, types[i].dump()));
    }
    if (types[i] == "sliding_attention" && c.sliding_window == 0) {
      return f.Error(
          fmt::format("field \"layer_types\"[{}] is \"sliding_attention\"; not supported for {}", i,
                      ArchitectureName(c.architecture)));
    }
  }
  return absl::OkStatus();
}

// Which attention variant: q/k/v bias, q/k norm, sliding window. Fields that would change the
// computation in a way the engine does not implement are errors, not ignored.
absl::Status ReadAttention(const JsonFields& f, ModelConfig* c) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<bool> bias, f.OptionalBool("attention_bias"));
  KVTIER_ASSIGN_OR_RETURN(std::optional<bool> mlp_bias, f.OptionalBool("mlp_bias"));
  if (mlp_bias.value_or(false)) return f.Error("field \"mlp_bias\" is true; not supported");
  KVTIER_ASSIGN_OR_RETURN(std::optional<bool> use_window, f.OptionalBool("use_sliding_window"));
  switch (c->architecture) {
    case Architecture::kLlama:
      c->qkv_bias = bias.value_or(false);
      break;
    case Architecture::kQwen2:  // Qwen2Attention always has q/k/v bias; no attention_bias field
      c->qkv_bias = true;
      break;
    case Architecture::kQwen3:
      c->qkv_bias = bias.value_or(false);
      c->qk_norm = true;
      break;
    case Architecture::kMistral: {
      KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> window, f.OptionalCount("sliding_window"));
      c->sliding_window = window.value_or(0);
      break;
    }
  }
  if ((c->architecture == Architecture::kQwen2 || c->architecture == Architecture::kQwen3) &&
      use_window.value_or(false)) {
    return f.Error(
        "field \"use_sliding_window\" is true; Qwen sliding-window layers are not supported");
  }
  return CheckLayerTypes(f, *c);
}

absl::Status ReadGeneration(const JsonFields& f, GenerationConfig* g) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> bos, f.OptionalId("bos_token_id"));
  if (bos) g->bos_token_id = bos;
  KVTIER_ASSIGN_OR_RETURN(std::vector<uint32_t> eos, f.IdList("eos_token_id"));
  if (!eos.empty()) g->eos_token_ids = std::move(eos);
  KVTIER_ASSIGN_OR_RETURN(std::optional<bool> do_sample, f.OptionalBool("do_sample"));
  if (do_sample) g->do_sample = do_sample;
  KVTIER_ASSIGN_OR_RETURN(std::optional<double> temperature, f.OptionalNumber("temperature"));
  if (temperature) g->temperature = temperature;
  KVTIER_ASSIGN_OR_RETURN(std::optional<uint32_t> top_k, f.OptionalId("top_k"));
  if (top_k) g->top_k = top_k;
  KVTIER_ASSIGN_OR_RETURN(std::optional<double> top_p, f.OptionalNumber("top_p"));
  if (top_p) g->top_p = top_p;
  if (temperature && *temperature < 0) {
    return f.Error(fmt::format("field \"temperature\" is {}; must be >= 0", *temperature));
  }
  if (top_p && (*top_p <= 0 || *top_p > 1)) {
    return f.Error(fmt::format("field \"top_p\" is {}; must be in (0, 1]", *top_p));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenIds(const JsonFields& f, const ModelConfig& c) {
  auto check = [&](uint32_t id, const char* field) -> absl::Status {
    if (id >= c.vocab_size) {
      return f.Error(
          fmt::format("field \"{}\" {} is not below \"vocab_size\" {}", field, id, c.vocab_size));
    }
    return absl::OkStatus();
  };
  if (c.generation.bos_token_id) {
    KVTIER_RETURN_IF_ERROR(check(*c.generation.bos_token_id, "bos_token_id"));
  }
  for (uint32_t id : c.generation.eos_token_ids) KVTIER_RETURN_IF_ERROR(check(id, "eos_token_id"));
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseConfig(const std::string& path, const Json& json) {
  JsonFields f(path, json);
  ModelConfig c;
  c.config_path = path;
  KVTIER_ASSIGN_OR_RETURN(c.architecture, ReadArchitecture(f));
  KVTIER_ASSIGN_OR_RETURN(c.dtype, ReadDtype(f));
  KVTIER_RETURN_IF_ERROR(ReadSizes(f, &c));
  KVTIER_RETURN_IF_ERROR(ReadRopeConfig(f, &c.rope));
  KVTIER_RETURN_IF_ERROR(ReadAttention(f, &c));
  KVTIER_ASSIGN_OR_RETURN(std::optional<bool> tied, f.OptionalBool("tie_word_embeddings"));
  c.tie_word_embeddings = tied.value_or(false);  // every supported architecture's default
  KVTIER_RETURN_IF_ERROR(ReadGeneration(f, &c.generation));
  KVTIER_RETURN_IF_ERROR(CheckTokenIds(f, c));
  return c;
}

// generation_config.json beside config.json overrides config.json's ids and adds sampling defaults.
absl::Status ReadGenerationFile(const std::filesystem::path& path, ModelConfig* c) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::OkStatus();
  const std::string name = path.string();
  KVTIER_ASSIGN_OR_RETURN(Json json, ReadJsonObject(name));
  JsonFields f(name, json);
  KVTIER_RETURN_IF_ERROR(ReadGeneration(f, &c->generation));
  return CheckTokenIds(f, *c);
}

}  // namespace

std::string_view ArchitectureName(Architecture architecture) { return InfoOf(architecture).name; }

std::string_view WeightDtypeName(WeightDtype dtype) {
  switch (dtype) {
    case WeightDtype::kFloat32:
      return "float32";
    case WeightDtype::kFloat16:
      return "float16";
    case WeightDtype::kBFloat16:
      return "bfloat16";
  }
  return "?";
}

uint32_t WeightDtypeBytes(WeightDtype dtype) { return dtype == WeightDtype::kFloat32 ? 4 : 2; }

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  const fs::path file = is_dir ? fs::path(path) / "config.json" : fs::path(path);
  KVTIER_ASSIGN_OR_RETURN(Json json, ReadJsonObject(file.string()));
  KVTIER_ASSIGN_OR_RETURN(ModelConfig config, ParseConfig(file.string(), json));
  const bool hf_layout = file.filename() == "config.json";
  const fs::path dir = file.parent_path();
  config.name = hf_layout ? fs::absolute(dir, ec).filename().string() : file.stem().string();
  if (hf_layout)
    KVTIER_RETURN_IF_ERROR(ReadGenerationFile(dir / "generation_config.json", &config));
  return config;
}

uint64_t ModelShape::KvBytesPerToken() const {
  return uint64_t{2} * layers * kv_heads * head_dim * dtype_bytes;
}

ModelShape ShapeOf(const ModelConfig& config) {
  return ModelShape{config.name, config.num_layers, config.num_kv_heads, config.head_dim,
                    WeightDtypeBytes(config.dtype)};
}

absl::StatusOr<ModelShape> LoadModelShape(const std::string& path) {
  KVTIER_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(path));
  return ShapeOf(config);
}

}  // namespace kvtier::engine
