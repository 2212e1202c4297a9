// Engine caches for kernels/kv_copy.h's tests: the four layouts of kernels/kv_layout.h carved out
// of one buffer (host or device; the same offsets either way, so a host copy of a device cache is
// described by the same call), and messages that say which block, layer, K|V, token, head and
// byte a differing offset belongs to.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/kv_layout.h"

namespace kvtier::kv_test {

enum class Layout { kVllm, kFlashInferNhd, kFlashInferHnd, kSglang };

inline const char* LayoutName(Layout l) {
  switch (l) {
    case Layout::kVllm:
      return "vllm";
    case Layout::kFlashInferNhd:
      return "flashinfer_nhd";
    case Layout::kFlashInferHnd:
      return "flashinfer_hnd";
    case Layout::kSglang:
      return "sglang";
  }
  return "?";
}

inline constexpr Layout kAllLayouts[] = {Layout::kVllm, Layout::kFlashInferNhd,
                                         Layout::kFlashInferHnd, Layout::kSglang};

struct Shape {
  uint32_t layers = 4;
  uint32_t num_blocks = 32;  // engine blocks in the cache
  uint32_t block_tokens = 16;
  uint32_t kv_heads = 8;
  uint32_t head_dim = 128;
  uint32_t elem_bytes = 2;  // bf16

  uint64_t piece_bytes() const { return uint64_t{block_tokens} * kv_heads * head_dim * elem_bytes; }
  // Every layout of this shape fills exactly layers * 2 * num_blocks pieces.
  uint64_t cache_bytes() const { return uint64_t{layers} * 2 * num_blocks * piece_bytes(); }
};

// The cache of `layout` and `shape` occupying [base, base + shape.cache_bytes()): one tensor per
// layer back to back (vLLM, FlashInfer) or every layer's K buffer, then every layer's V buffer
// (SGLang).
inline PagedKvCache MakeCache(Layout layout, const Shape& s, void* base) {
  auto* b = static_cast<char*>(base);
  const uint64_t per_layer = 2 * uint64_t{s.num_blocks} * s.piece_bytes();
  std::vector<void*> layer_bases, v_bases;
  for (uint32_t l = 0; l < s.layers; ++l) {
    layer_bases.push_back(b + l * (layout == Layout::kSglang ? per_layer / 2 : per_layer));
    v_bases.push_back(b + (s.layers + l) * (per_layer / 2));
  }
  switch (layout) {
    case Layout::kVllm:
      return VllmLayout(layer_bases, s.num_blocks, s.block_tokens, s.kv_heads, s.head_dim,
                        s.elem_bytes);
    case Layout::kFlashInferNhd:
      return FlashInferNhdLayout(layer_bases, s.block_tokens, s.kv_heads, s.head_dim, s.elem_bytes);
    case Layout::kFlashInferHnd:
      return FlashInferHndLayout(layer_bases, s.block_tokens, s.kv_heads, s.head_dim, s.elem_bytes);
    case Layout::kSglang:
      return SglangMhaLayout(layer_bases, v_bases, s.block_tokens, s.kv_heads, s.head_dim,
                             s.elem_bytes);
  }
  return {};
}

// `count` distinct engine block ids out of [0, num_blocks), in shuffled order (deterministic).
inline std::vector<int32_t> ShuffledBlocks(uint32_t num_blocks, uint32_t count, uint32_t seed) {
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(seed);
  for (uint32_t i = num_blocks - 1; i > 0; --i) {  // Fisher-Yates with our own index draw
    std::swap(ids[i], ids[rng() % (i + 1)]);
  }
  ids.resize(count);
  return ids;
}

// Which (layer, K|V, block, token, head, byte) of `cache` (built by MakeCache over `base`) holds
// byte `offset` of the region; "a gap" when no row does.
inline std::string DescribeCacheOffset(const PagedKvCache& cache, const Shape& s, const void* base,
                                       uint64_t offset) {
  const char* target = static_cast<const char*>(base) + offset;
  for (uint32_t l = 0; l < cache.num_layers(); ++l) {
    for (uint32_t kv = 0; kv < 2; ++kv) {
      const char* piece0 =
          static_cast<const char*>(kv == 0 ? cache.layers[l].k : cache.layers[l].v);
      for (uint32_t b = 0; b < s.num_blocks; ++b) {
        for (uint32_t t = 0; t < cache.block_tokens; ++t) {
          for (uint32_t h = 0; h < cache.kv_heads; ++h) {
            const char* row = piece0 + int64_t{b} * cache.block_stride +
                              int64_t{t} * cache.token_stride + int64_t{h} * cache.head_stride;
            if (target >= row && target < row + cache.row_bytes()) {
              return fmt::format(
                  "cache offset {}: layer {} {} engine block {} token {} head {} "
                  "byte {} of the row",
                  offset, l, kv == 0 ? "K" : "V", b, t, h, target - row);
            }
          }
        }
      }
    }
  }
  return fmt::format("cache offset {}: a gap between rows", offset);
}

// Which (batch entry, layer, K|V, token, head, byte) holds byte `offset` of payloads laid out one
// after another, payload_bytes each.
inline std::string DescribePayloadOffset(const PagedKvCache& cache, uint64_t offset) {
  const uint64_t row = cache.row_bytes();
  uint64_t rest = offset % cache.payload_bytes();
  const uint64_t piece = rest / cache.piece_bytes();
  rest %= cache.piece_bytes();
  const uint64_t r = rest / row;
  return fmt::format("payload {} layer {} {} token {} head {} byte {} of the row (offset {})",
                     offset / cache.payload_bytes(), piece / 2, piece % 2 == 0 ? "K" : "V",
                     r / cache.kv_heads, r % cache.kv_heads, rest % row, offset);
}

// Index of the first differing byte, or `bytes` when the ranges are equal.
inline uint64_t FirstDifference(const void* a, const void* b, uint64_t bytes) {
  if (std::memcmp(a, b, bytes) == 0) return bytes;
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  return static_cast<uint64_t>(std::mismatch(x, x + bytes, y).first - x);
}

}  // namespace kvtier::kv_test
