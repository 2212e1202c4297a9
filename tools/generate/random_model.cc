#include "tools/generate/random_model.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>
#include <vector>

#include "engine/tokenizer.h"
#include "engine/weights.h"
#include "tools/generate/bf16_safetensors.h"

namespace kvtier::generate {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string_view ModelType(engine::Architecture a) {
  switch (a) {
    case engine::Architecture::kLlama:
      return "llama";
    case engine::Architecture::kQwen2:
      return "qwen2";
    case engine::Architecture::kQwen3:
      return "qwen3";
    case engine::Architecture::kMistral:
      return "mistral";
  }
  return "llama";
}

Json ConfigJson(const RandomModelOptions& o, size_t vocab) {
  const uint32_t head_dim = o.head_dim != 0 ? o.head_dim : o.hidden / std::max(o.heads, 1u);
  Json c = {{"architectures", {engine::ArchitectureName(o.architecture)}},
            {"model_type", ModelType(o.architecture)},
            {"dtype", "bfloat16"},
            {"vocab_size", vocab},
            {"hidden_size", o.hidden},
            {"intermediate_size", o.intermediate != 0 ? o.intermediate : 3 * o.hidden},
            {"num_hidden_layers", o.layers},
            {"num_attention_heads", o.heads},
            {"num_key_value_heads", o.kv_heads},
            {"head_dim", head_dim},
            {"hidden_act", "silu"},
            {"max_position_embeddings", o.max_position},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 1000000.0},
            {"tie_word_embeddings", o.tie_embeddings},
            {"attention_bias", o.architecture == engine::Architecture::kQwen2}};
  if (o.architecture == engine::Architecture::kMistral) {
    c["sliding_window"] = o.sliding_window != 0 ? Json(o.sliding_window) : Json(nullptr);
  }
  c["kvtier_note"] =
      "random weights (kvtier make-model): the text this model writes is meaningless";
  return c;
}

Json GenerationJson(const engine::Tokenizer& tokenizer) {
  const engine::SpecialTokens& special = tokenizer.special_tokens();
  Json g = Json::object();
  if (special.bos) g["bos_token_id"] = *special.bos;
  if (!special.eos.empty()) g["eos_token_id"] = special.eos;
  return g;
}

absl::Status WriteJson(const fs::path& path, const Json& json) {
  std::ofstream out(path, std::ios::trunc);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(fmt::format("{}: cannot write", path.string()));
  return absl::OkStatus();
}

absl::Status CopyTokenizer(const fs::path& from, const fs::path& to) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    std::error_code ec;
    if (!fs::exists(from / name)) continue;  // Tokenizer::Load already required the first two
    fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return absl::InternalError(
          fmt::format("copying {} to {}: {}", (from / name).string(), to.string(), ec.message()));
    }
  }
  return absl::OkStatus();
}

// Norm weights 1 (as a fresh transformers model has), biases 0, the rest normal(0, 0.02).
void FillRandom(const std::string& name, std::mt19937_64& rng, std::vector<float>& values) {
  const bool norm = name.ends_with("norm.weight");
  if (norm || name.ends_with(".bias")) {
    std::fill(values.begin(), values.end(), norm ? 1.0f : 0.0f);
    return;
  }
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (float& v : values) v = normal(rng);
}

}  // namespace

absl::StatusOr<RandomModelSummary> WriteRandomModel(const RandomModelOptions& o) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<engine::Tokenizer> tokenizer,
                          engine::Tokenizer::Load(o.tokenizer_dir));
  const fs::path out(o.out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return absl::InternalError(fmt::format("{}: cannot create: {}", o.out_dir, ec.message()));
  KVTIER_RETURN_IF_ERROR(WriteJson(out / "config.json", ConfigJson(o, tokenizer->vocab_size())));
  KVTIER_RETURN_IF_ERROR(WriteJson(out / "generation_config.json", GenerationJson(*tokenizer)));
  RandomModelSummary summary;
  KVTIER_ASSIGN_OR_RETURN(summary.config, engine::LoadModelConfig(o.out_dir));
  std::vector<Bf16Tensor> tensors;
  for (const engine::WeightSpec& spec : engine::ExpectedWeights(summary.config)) {
    tensors.push_back({spec.name, spec.shape});
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    summary.parameters += static_cast<uint64_t>(n);
  }
  std::mt19937_64 rng(o.seed);
  const fs::path weights = out / "model.safetensors";
  KVTIER_RETURN_IF_ERROR(WriteBf16Safetensors(
      weights.string(), tensors,
      [&](size_t i, std::vector<float>& values) { FillRandom(tensors[i].name, rng, values); }));
  summary.safetensors_bytes = fs::file_size(weights, ec);
  KVTIER_RETURN_IF_ERROR(CopyTokenizer(o.tokenizer_dir, out));
  return summary;
}

}  // namespace kvtier::generate
