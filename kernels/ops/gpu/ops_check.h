// Internal to kernels/ops/gpu: the argument checks of the GPU variant's host wrappers, one wording
// for every operator.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "kernels/ops/attention.h"

namespace kvtier::ops::gpu_check {

inline absl::Status Positive(std::string_view op, std::string_view what, int64_t v) {
  if (v > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}: {} must be positive, got {}", op, what, v));
}

inline absl::Status MultipleOf8(std::string_view op, std::string_view what, int64_t v) {
  if (v > 0 && v % 8 == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "{}: {} must be a positive multiple of 8 (16-byte accesses), got {}", op, what, v));
}

inline absl::Status Aligned16(std::string_view op, std::string_view what, const void* p) {
  if (p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{}: {} must be a non-null 16-byte aligned device pointer, got {}", op, what, p));
}

inline absl::Status NotNull(std::string_view op, std::string_view what, const void* p) {
  if (p != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}: {} is null", op, what));
}

// The attention kernels' shape limits (attention_gpu.h).
inline absl::Status AttentionShape(std::string_view op, const AttentionParams& p,
                                   int64_t max_group) {
  const PagedKvGeometry& g = p.kv;
  const int64_t d = g.head_dim;
  if (d != 16 && d != 32 && d != 64 && d != 128) {
    return absl::InvalidArgumentError(
        fmt::format("{}: head_dim {} is not supported (16, 32, 64 or 128)", op, d));
  }
  KVTIER_RETURN_IF_ERROR(Positive(op, "kv_heads", g.kv_heads));
  KVTIER_RETURN_IF_ERROR(Positive(op, "block_tokens", g.block_tokens));
  if (p.layer < 0 || p.layer >= g.layers) {
    return absl::InvalidArgumentError(
        fmt::format("{}: layer {} outside the pool's {} layers", op, p.layer, g.layers));
  }
  if (p.q_heads <= 0 || p.q_heads % g.kv_heads != 0 || p.q_heads / g.kv_heads > max_group) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: q_heads {} must be a positive multiple of kv_heads {} with at most {} per KV head", op,
        p.q_heads, g.kv_heads, max_group));
  }
  if (p.sliding_window < 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: sliding_window {} is negative", op, p.sliding_window));
  }
  return absl::OkStatus();
}

}  // namespace kvtier::ops::gpu_check
