// A model's weights in device memory as 16-bit floats (bf16 or fp16), for the GPU backend: the
// tensors engine/weights.h ExpectedWeights names, read from the memory-mapped checkpoint, converted
// on the host where the checkpoint's dtype differs (F32 -> either; BF16 <-> F16, rounding to
// nearest even; values beyond fp16's range become infinities), and copied through two pinned
// staging buffers so that reading the file overlaps the copies.
//
// Layout: one device allocation. As in the CPU backend (weights.h), what one GEMM can do at once
// is one matrix: q_proj, k_proj, v_proj are consecutive rows of one [q_dim + 2 kv_dim, hidden]
// matrix (their biases one vector), gate_proj and up_proj one [2 intermediate, hidden] matrix.
//
// Thread-safety: immutable after Upload; the pointers may be read by any thread and any stream.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "kernels/gpu_runtime.h"
#include "kernels/ops/gpu/ops_gpu.h"

namespace kvtier::engine {

// Device pointers into GpuWeights' allocation; 16-bit elements of its dtype.
struct GpuLayerWeights {
  const void* input_norm = nullptr;  // [hidden]                     input_layernorm
  const void* qkv = nullptr;         // [q_dim + 2 kv_dim, hidden]   q_proj; k_proj; v_proj
  const void* qkv_bias = nullptr;    // [q_dim + 2 kv_dim], or nullptr without bias
  const void* q_norm = nullptr;      // [head_dim], or nullptr (Qwen3 only)
  const void* k_norm = nullptr;      // [head_dim], or nullptr
  const void* o_proj = nullptr;      // [hidden, q_dim]
  const void* post_norm = nullptr;   // [hidden]                     post_attention_layernorm
  const void* gate_up = nullptr;     // [2 intermediate, hidden]     gate_proj; up_proj
  const void* down = nullptr;        // [hidden, intermediate]
};

class GpuWeights {
 public:
  // Reads every expected tensor of `checkpoint` (errors as LoadHostWeights': NotFound for a missing
  // tensor, InvalidArgument naming the file and tensor for a shape or dtype other than expected)
  // into device memory of the current device, converted to `dtype`. Returns once the copies are
  // done. The vendor's error (out of memory) as a Status.
  static absl::StatusOr<std::unique_ptr<GpuWeights>> Upload(const ModelConfig& config,
                                                            const Checkpoint& checkpoint,
                                                            ops::gpu::DType dtype);
  ~GpuWeights();
  GpuWeights(const GpuWeights&) = delete;
  GpuWeights& operator=(const GpuWeights&) = delete;

  ops::gpu::DType dtype() const { return dtype_; }
  const void* embed() const { return embed_; }  // [vocab, hidden]   model.embed_tokens
  const GpuLayerWeights& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }
  const void* final_norm() const { return final_norm_; }  // [hidden]  model.norm
  // The output projection: lm_head, or embed_tokens when tied.  [vocab, hidden]
  const void* output() const { return output_; }
  uint64_t bytes() const { return bytes_; }

 private:
  GpuWeights() = default;

  ops::gpu::DType dtype_ = ops::gpu::DType::kBf16;
  void* arena_ = nullptr;
  uint64_t bytes_ = 0;
  const void* embed_ = nullptr;
  std::vector<GpuLayerWeights> layers_;
  const void* final_norm_ = nullptr;
  const void* output_ = nullptr;
};

}  // namespace kvtier::engine
