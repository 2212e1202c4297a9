// Writing a safetensors file of bf16 tensors (make-model's random weights): 8 bytes little-endian
// header length, the header JSON ({"name": {"dtype": "BF16", "shape": [...], "data_offsets":
// [begin, end]}, "__metadata__": {"format": "pt"}}), then each tensor's bytes in order. Tensors are
// produced one at a time, so the file never has to be held in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::generate {

struct Bf16Tensor {
  std::string name;
  std::vector<int64_t> shape;  // each > 0
};

// Round-to-nearest-even, as torch's float -> bfloat16 conversion (NaN stays NaN).
uint16_t ToBf16(float value);

// Writes `tensors` to `path`; `fill(i, values)` fills tensor i's product(shape) fp32 values
// (values is already that size), which are stored as bf16. Errors name the file.
absl::Status WriteBf16Safetensors(
    const std::string& path, const std::vector<Bf16Tensor>& tensors,
    const std::function<void(size_t index, std::vector<float>& values)>& fill);

}  // namespace kvtier::generate
