// kernels/kv_layout.h: sizes, validation and the engines' layouts as strides.
#include "kernels/kv_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

namespace kvtier {
namespace {

// One dimension of an engine block: `count` rows `stride` bytes apart.
struct Dim {
  const char* name;
  int64_t stride;
  uint64_t count;
};

absl::Status Invalid(std::string msg) {
  return absl::InvalidArgumentError("PagedKvCache: " + std::move(msg));
}

absl::Status CheckSizes(const PagedKvCache& c) {
  if (c.layers.empty()) return Invalid("layers is empty");
  const std::array<std::pair<const char*, uint32_t>, 4> sizes = {{{"block_tokens", c.block_tokens},
                                                                  {"kv_heads", c.kv_heads},
                                                                  {"head_dim", c.head_dim},
                                                                  {"elem_bytes", c.elem_bytes}}};
  for (const auto& [name, value] : sizes) {
    if (value == 0) return Invalid(fmt::format("{} is 0", name));
  }
  return absl::OkStatus();
}

// The rows of one block are disjoint when, ordering its dimensions by stride, each stride clears
// the extent of everything inside it (dimensions of one row do not constrain anything); the
// blocks are disjoint when block_stride clears a whole block.
absl::Status CheckStrides(const PagedKvCache& c) {
  std::array<Dim, 2> dims = {{{"head_stride", c.head_stride, c.kv_heads},
                              {"token_stride", c.token_stride, c.block_tokens}}};
  std::sort(dims.begin(), dims.end(),
            [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  int64_t extent = static_cast<int64_t>(c.row_bytes());
  for (const Dim& d : dims) {
    if (d.count <= 1) continue;
    if (d.stride < extent) {
      return Invalid(fmt::format("{} {} overlaps rows: it must be at least {} bytes", d.name,
                                 d.stride, extent));
    }
    extent += d.stride * static_cast<int64_t>(d.count - 1);
  }
  if (c.block_stride < extent) {
    return Invalid(fmt::format("block_stride {} overlaps blocks: a block spans {} bytes",
                               c.block_stride, extent));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t PagedKvCache::piece_bytes() const {
  return uint64_t{block_tokens} * kv_heads * row_bytes();
}

uint64_t PagedKvCache::payload_bytes() const { return uint64_t{num_layers()} * 2 * piece_bytes(); }

bool PagedKvCache::pieces_contiguous() const {
  const int64_t row = static_cast<int64_t>(row_bytes());
  const bool heads_packed = kv_heads <= 1 || head_stride == row;
  const bool tokens_packed = block_tokens <= 1 || token_stride == row * kv_heads;
  return heads_packed && tokens_packed;
}

absl::Status ValidatePagedKvCache(const PagedKvCache& cache) {
  KVTIER_RETURN_IF_ERROR(CheckSizes(cache));
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    const PagedKvLayer& layer = cache.layers[l];
    if (layer.k == nullptr) return Invalid(fmt::format("layers[{}].k is null", l));
    if (layer.v == nullptr) return Invalid(fmt::format("layers[{}].v is null", l));
    if (layer.k == layer.v) return Invalid(fmt::format("layers[{}].k equals layers[{}].v", l, l));
  }
  return CheckStrides(cache);
}

namespace {

// Layout fields common to all factories; strides are left to the caller.
PagedKvCache Shape(uint32_t block_tokens, uint32_t kv_heads, uint32_t head_dim,
                   uint32_t elem_bytes) {
  PagedKvCache c;
  c.block_tokens = block_tokens;
  c.kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.elem_bytes = elem_bytes;
  return c;
}

// Per layer: K piece of block b at base + b * block_stride, V `v_offset` bytes after it.
PagedKvCache OneTensorPerLayer(PagedKvCache c, std::span<void* const> layer_bases,
                               int64_t v_offset) {
  for (void* base : layer_bases) {
    auto* b = static_cast<char*>(base);
    c.layers.push_back({b, b == nullptr ? nullptr : b + v_offset});
  }
  return c;
}

}  // namespace

PagedKvCache VllmLayout(std::span<void* const> layer_bases, uint32_t num_blocks,
                        uint32_t block_tokens, uint32_t kv_heads, uint32_t head_dim,
                        uint32_t elem_bytes) {
  // [2, num_blocks, block_tokens, kv_heads, head_dim]
  PagedKvCache c = Shape(block_tokens, kv_heads, head_dim, elem_bytes);
  c.head_stride = static_cast<int64_t>(c.row_bytes());
  c.token_stride = c.head_stride * kv_heads;
  c.block_stride = c.token_stride * block_tokens;
  const int64_t v_offset = c.block_stride * int64_t{num_blocks};
  return OneTensorPerLayer(std::move(c), layer_bases, v_offset);
}

PagedKvCache FlashInferNhdLayout(std::span<void* const> layer_bases, uint32_t block_tokens,
                                 uint32_t kv_heads, uint32_t head_dim, uint32_t elem_bytes) {
  // [num_blocks, 2, block_tokens, kv_heads, head_dim]
  PagedKvCache c = Shape(block_tokens, kv_heads, head_dim, elem_bytes);
  c.head_stride = static_cast<int64_t>(c.row_bytes());
  c.token_stride = c.head_stride * kv_heads;
  c.block_stride = 2 * c.token_stride * block_tokens;
  const int64_t v_offset = c.block_stride / 2;
  return OneTensorPerLayer(std::move(c), layer_bases, v_offset);
}

PagedKvCache FlashInferHndLayout(std::span<void* const> layer_bases, uint32_t block_tokens,
                                 uint32_t kv_heads, uint32_t head_dim, uint32_t elem_bytes) {
  // [num_blocks, 2, kv_heads, block_tokens, head_dim]
  PagedKvCache c = Shape(block_tokens, kv_heads, head_dim, elem_bytes);
  c.token_stride = static_cast<int64_t>(c.row_bytes());
  c.head_stride = c.token_stride * block_tokens;
  c.block_stride = 2 * c.head_stride * kv_heads;
  const int64_t v_offset = c.block_stride / 2;
  return OneTensorPerLayer(std::move(c), layer_bases, v_offset);
}

PagedKvCache SglangMhaLayout(std::span<void* const> k_bases, std::span<void* const> v_bases,
                             uint32_t block_tokens, uint32_t kv_heads, uint32_t head_dim,
                             uint32_t elem_bytes) {
  // K and V each [num_tokens, kv_heads, head_dim]; page p holds tokens [p * block_tokens, ...).
  PagedKvCache c = Shape(block_tokens, kv_heads, head_dim, elem_bytes);
  c.head_stride = static_cast<int64_t>(c.row_bytes());
  c.token_stride = c.head_stride * kv_heads;
  c.block_stride = c.token_stride * block_tokens;
  // One layer per entry of the longer span: a buffer missing from the other becomes a null
  // pointer, which ValidatePagedKvCache reports by layer.
  const size_t n = std::max(k_bases.size(), v_bases.size());
  for (size_t l = 0; l < n; ++l) {
    c.layers.push_back(
        {l < k_bases.size() ? k_bases[l] : nullptr, l < v_bases.size() ? v_bases[l] : nullptr});
  }
  return c;
}

}  // namespace kvtier
