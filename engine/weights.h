// The weights of a supported model (model_config.h): which tensors each architecture's checkpoint
// holds, under transformers' names, with which shapes; and loading them into the CPU backend as
// fp32 host arrays (bf16 and fp16 converted exactly; fp32 copied).
//
// The CPU backend's layout fuses what one GEMM can do at once (as vLLM does): q/k/v projections
// stacked into one [q_dim + 2 kv_dim, hidden] matrix, gate/up into one [2 intermediate, hidden].
//
// Thread-safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"

namespace kvtier::engine {

// One tensor a checkpoint must hold: its transformers name and shape.
struct WeightSpec {
  std::string name;            // e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // e.g. {q_dim, hidden}
};

// Every tensor the engine reads for `config`, in load order. Tied models have no lm_head.weight
// (transformers does not save it; if present it is ignored). Tensors a checkpoint holds beyond
// these (e.g. rotary inv_freq buffers) are ignored.
std::vector<WeightSpec> ExpectedWeights(const ModelConfig& config);

struct HostLayerWeights {
  std::vector<float> input_norm;  // [hidden]          input_layernorm
  std::vector<float> qkv;         // [q_dim + 2 kv_dim, hidden]  q_proj; k_proj; v_proj
  std::vector<float> qkv_bias;    // [q_dim + 2 kv_dim], or empty without bias
  std::vector<float> q_norm;      // [head_dim], or empty (Qwen3 only)
  std::vector<float> k_norm;      // [head_dim], or empty
  std::vector<float> o_proj;      // [hidden, q_dim]
  std::vector<float> post_norm;   // [hidden]          post_attention_layernorm
  std::vector<float> gate_up;     // [2 intermediate, hidden]  gate_proj; up_proj
  std::vector<float> down;        // [hidden, intermediate]
};

struct HostWeights {
  std::vector<float> embed;  // [vocab, hidden]   model.embed_tokens
  std::vector<HostLayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]          model.norm
  std::vector<float> lm_head;     // [vocab, hidden], or empty when tied to embed

  // The output projection: lm_head, or embed when tied.  [vocab, hidden]
  const float* output() const { return lm_head.empty() ? embed.data() : lm_head.data(); }
};

// Reads every expected tensor from `checkpoint` and converts it to fp32. Errors name the file and
// tensor: NotFound for a missing tensor, InvalidArgument for a shape other than expected or a dtype
// other than BF16, F16, F32.
absl::StatusOr<HostWeights> LoadHostWeights(const ModelConfig& config,
                                            const Checkpoint& checkpoint);

// Converts one tensor's data to fp32 into `out` (product(shape) floats).
// InvalidArgument naming the file and tensor if its dtype is not BF16, F16 or F32.
absl::Status ToFloat32(const std::string& name, const TensorView& tensor, float* out);

}  // namespace kvtier::engine
