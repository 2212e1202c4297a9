// A Hugging Face causal-LM model's configuration: config.json (and generation_config.json when the
// model directory has one), parsed and validated once, at load. The one parser of config.json in
// kvtier: the engine builds its model from a ModelConfig, and `kvtier replay --model` sizes KV
// blocks from the ModelShape derived from it.
//
// Supported architectures ("architectures" in config.json):
//   LlamaForCausalLM    Llama 3.x, rope_scaling "llama3" or none; attention_bias optional
//   Qwen2ForCausalLM    Qwen2 / Qwen2.5: q/k/v projections with bias
//   Qwen3ForCausalLM    Qwen3: RMSNorm over each head of q and k before RoPE; explicit head_dim
//   MistralForCausalLM  sliding_window (null: full attention)
// Both spellings transformers has written are read: 4.x ("torch_dtype", "rope_theta",
// "rope_scaling") and 5.x ("dtype", "rope_parameters" holding rope_theta). Anything else the engine
// would compute differently from transformers — an unknown architecture, rope type, activation,
// dtype, a Qwen sliding window, MLP bias, sizes that do not divide — is InvalidArgument naming the
// file and the field; never a silently different model.
//
// Thread-safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::engine {

enum class Architecture { kLlama, kQwen2, kQwen3, kMistral };

// "LlamaForCausalLM", ...
std::string_view ArchitectureName(Architecture architecture);

// The dtype the checkpoint's weights are stored in ("dtype" / "torch_dtype").
enum class WeightDtype { kFloat32, kFloat16, kBFloat16 };

std::string_view WeightDtypeName(WeightDtype dtype);  // "float32", "float16", "bfloat16"
uint32_t WeightDtypeBytes(WeightDtype dtype);         // 4, 2, 2

// Rotary position embedding, neox style (rotate halves) as in transformers' Llama family.
struct RopeConfig {
  enum class Type { kDefault, kLlama3 };
  Type type = Type::kDefault;
  double theta = 0;  // base: inv_freq[i] = theta^(-2i / head_dim)
  // llama3 only (transformers' _compute_llama3_parameters): wavelengths above
  // original_max_position / low_freq_factor are divided by `factor`, those below
  // original_max_position / high_freq_factor kept, those between interpolated.
  double factor = 1;
  double low_freq_factor = 1;
  double high_freq_factor = 1;
  uint32_t original_max_position = 0;
};

// generation_config.json (all optional; config.json's bos/eos ids when it is absent).
struct GenerationConfig {
  std::optional<uint32_t> bos_token_id;
  std::vector<uint32_t> eos_token_ids;  // generation stops at any of these
  std::optional<bool> do_sample;        // false or absent: transformers decodes greedily
  std::optional<double> temperature;    // defaults the model's authors chose for sampling
  std::optional<uint32_t> top_k;
  std::optional<double> top_p;
};

struct ModelConfig {
  std::string name;         // the model directory's name, or the config file's stem
  std::string config_path;  // the config.json that was read
  Architecture architecture = Architecture::kLlama;
  WeightDtype dtype = WeightDtype::kBFloat16;

  uint32_t vocab_size = 0;
  uint32_t hidden_size = 0;
  uint32_t intermediate_size = 0;
  uint32_t num_layers = 0;
  uint32_t num_heads = 0;     // query heads
  uint32_t num_kv_heads = 0;  // divides num_heads (GQA group = num_heads / num_kv_heads)
  uint32_t head_dim = 0;      // even (RoPE rotates pairs)
  uint32_t max_position_embeddings = 0;
  double rms_norm_eps = 0;
  RopeConfig rope;
  uint32_t sliding_window = 0;  // 0: full attention; else a query sees the last `sliding_window`
                                // positions, itself included (transformers' mask)
  bool tie_word_embeddings = false;  // lm_head is embed_tokens (no lm_head.weight stored)
  bool qkv_bias = false;             // q/k/v projections have a bias
  bool qk_norm = false;              // RMSNorm of [head_dim] over each q and k head

  GenerationConfig generation;

  uint32_t q_dim() const { return num_heads * head_dim; }
  uint32_t kv_dim() const { return num_kv_heads * head_dim; }
};

// Loads `path`: a model directory (reads DIR/config.json and DIR/generation_config.json if
// present) or a config.json file itself (also reads generation_config.json beside it when the file
// is named config.json). NotFound if the config cannot be opened; InvalidArgument naming the file
// and the field otherwise.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

// The KV geometry of a model, what tier sizes are computed from.
struct ModelShape {
  std::string name;
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t dtype_bytes = 0;  // the weights' dtype: KV is kept in it (2 for bf16/fp16, 4 for fp32)

  // K and V of one token over all layers: 2 * layers * kv_heads * head_dim * dtype_bytes.
  uint64_t KvBytesPerToken() const;
};

ModelShape ShapeOf(const ModelConfig& config);

// LoadModelConfig(path), then ShapeOf.
absl::StatusOr<ModelShape> LoadModelShape(const std::string& path);

}  // namespace kvtier::engine
