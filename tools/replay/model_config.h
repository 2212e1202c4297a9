// Model shapes for sizing tiers in bytes: configs/models/NAME.json holds the fields of a Hugging
// Face config.json that decide KV size (num_hidden_layers, num_key_value_heads, head_dim or
// hidden_size / num_attention_heads, torch_dtype).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kvtier::replay {

struct ModelShape {
  std::string name;
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t dtype_bytes = 0;  // 2 for bfloat16/float16, 4 for float32, 1 for fp8

  // K and V of one token over all layers: 2 * layers * kv_heads * head_dim * dtype_bytes.
  uint64_t KvBytesPerToken() const;
};

// Loads and validates a model file. Errors name the file and the field.
absl::StatusOr<ModelShape> LoadModelShape(const std::string& path);

}  // namespace kvtier::replay
