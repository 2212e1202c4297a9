#include "engine/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cstring>

namespace kvtier::engine {
namespace {

std::string LayerName(uint32_t layer, const char* suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

// IEEE half -> float, exactly (subnormals, infinities and NaN included).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);  // inf or NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {        // subnormal: normalize
    int e = 113;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}

float Bf16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace

absl::Status ToFloat32(const std::string& name, const TensorView& tensor, float* out) {
  const std::byte* src = tensor.data.data();
  if (tensor.dtype == "F32") {
    std::memcpy(out, src, tensor.data.size());  // src may be unaligned: memcpy, not a cast
    return absl::OkStatus();
  }
  const size_t count = tensor.data.size() / 2;
  if (tensor.dtype == "BF16" || tensor.dtype == "F16") {
    const bool bf16 = tensor.dtype == "BF16";
    for (size_t i = 0; i < count; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      out[i] = bf16 ? Bf16ToFloat(v) : HalfToFloat(v);
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: tensor \"{}\" has dtype {}; expected BF16, F16 or F32",
                  tensor.file ? *tensor.file : "?", name, tensor.dtype));
}

std::vector<WeightSpec> ExpectedWeights(const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, q = c.q_dim(), kv = c.kv_dim();
  const int64_t inter = c.intermediate_size, hd = c.head_dim;
  std::vector<WeightSpec> specs = {{"model.embed_tokens.weight", {c.vocab_size, hidden}}};
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    specs.push_back({LayerName(l, "input_layernorm.weight"), {hidden}});
    specs.push_back({LayerName(l, "self_attn.q_proj.weight"), {q, hidden}});
    specs.push_back({LayerName(l, "self_attn.k_proj.weight"), {kv, hidden}});
    specs.push_back({LayerName(l, "self_attn.v_proj.weight"), {kv, hidden}});
    if (c.qkv_bias) {
      specs.push_back({LayerName(l, "self_attn.q_proj.bias"), {q}});
      specs.push_back({LayerName(l, "self_attn.k_proj.bias"), {kv}});
      specs.push_back({LayerName(l, "self_attn.v_proj.bias"), {kv}});
    }
    if (c.qk_norm) {
      specs.push_back({LayerName(l, "self_attn.q_norm.weight"), {hd}});
      specs.push_back({LayerName(l, "self_attn.k_norm.weight"), {hd}});
    }
    specs.push_back({LayerName(l, "self_attn.o_proj.weight"), {hidden, q}});
    specs.push_back({LayerName(l, "post_attention_layernorm.weight"), {hidden}});
    specs.push_back({LayerName(l, "mlp.gate_proj.weight"), {inter, hidden}});
    specs.push_back({LayerName(l, "mlp.up_proj.weight"), {inter, hidden}});
    specs.push_back({LayerName(l, "mlp.down_proj.weight"), {hidden, inter}});
  }
  specs.push_back({"model.norm.weight", {hidden}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, hidden}});
  return specs;
}

namespace {

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Appends tensor `spec` (checked) converted to fp32 to `out`.
absl::Status Append(const Checkpoint& ckpt, const WeightSpec& spec, std::vector<float>* out) {
  KVTIER_ASSIGN_OR_RETURN(const TensorView* tensor, ckpt.Find(spec.name));
  if (tensor->shape != spec.shape) {
    return absl::InvalidArgumentError(
        fmt::format("{}: tensor \"{}\" has shape [{}]; the config implies [{}]", *tensor->file,
                    spec.name, fmt::join(tensor->shape, ", "), fmt::join(spec.shape, ", ")));
  }
  const size_t at = out->size();
  out->resize(at + Elements(spec.shape));
  return ToFloat32(spec.name, *tensor, out->data() + at);
}

}  // namespace

absl::StatusOr<HostWeights> LoadHostWeights(const ModelConfig& config, const Checkpoint& ckpt) {
  const std::vector<WeightSpec> specs = ExpectedWeights(config);
  HostWeights w;
  w.layers.resize(config.num_layers);
  size_t i = 0;
  auto next = [&](std::vector<float>* out) { return Append(ckpt, specs[i++], out); };
  KVTIER_RETURN_IF_ERROR(next(&w.embed));
  for (HostLayerWeights& layer : w.layers) {  // the order ExpectedWeights lists them in
    KVTIER_RETURN_IF_ERROR(next(&layer.input_norm));
    for (int k = 0; k < 3; ++k) KVTIER_RETURN_IF_ERROR(next(&layer.qkv));
    if (config.qkv_bias) {
      for (int k = 0; k < 3; ++k) KVTIER_RETURN_IF_ERROR(next(&layer.qkv_bias));
    }
    if (config.qk_norm) {
      KVTIER_RETURN_IF_ERROR(next(&layer.q_norm));
      KVTIER_RETURN_IF_ERROR(next(&layer.k_norm));
    }
    KVTIER_RETURN_IF_ERROR(next(&layer.o_proj));
    KVTIER_RETURN_IF_ERROR(next(&layer.post_norm));
    for (int k = 0; k < 2; ++k) KVTIER_RETURN_IF_ERROR(next(&layer.gate_up));
    KVTIER_RETURN_IF_ERROR(next(&layer.down));
  }
  KVTIER_RETURN_IF_ERROR(next(&w.final_norm));
  if (!config.tie_word_embeddings) KVTIER_RETURN_IF_ERROR(next(&w.lm_head));
  return w;
}

}  // namespace kvtier::engine
