// kernels/kv_layout.h: each factory puts element (layer, K|V, block, token, head, dim) where the
// engine's documented tensor shape does, and validation names what is wrong with a bad layout.
#include "kernels/kv_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvtier {
namespace {

constexpr uint32_t kBlocks = 5, kTokens = 4, kHeads = 3, kDim = 8, kElem = 2;

// Byte address of element (block, token, head, dim) of K or V of `layer` as the layout sees it.
const char* Element(const PagedKvCache& c, uint32_t layer, bool v, uint32_t b, uint32_t t,
                    uint32_t h, uint32_t d) {
  const char* piece = static_cast<const char*>(v ? c.layers[layer].v : c.layers[layer].k);
  return piece + b * c.block_stride + t * c.token_stride + h * c.head_stride + d * c.elem_bytes;
}

std::vector<char> g_memory(1 << 16);
char* Base(size_t offset) { return g_memory.data() + offset; }

TEST(KvLayout, VllmIsTwoByBlocksByTokensByHeadsByDimPerLayer) {
  std::vector<void*> bases = {Base(0), Base(4096)};
  const PagedKvCache c = VllmLayout(bases, kBlocks, kTokens, kHeads, kDim, kElem);
  ASSERT_EQ(c.num_layers(), 2u);
  // [2, num_blocks, block_tokens, kv_heads, head_dim]: V of block 3, token 1, head 2, dim 5.
  const size_t index = (((1 * kBlocks + 3) * kTokens + 1) * kHeads + 2) * kDim + 5;
  EXPECT_EQ(Element(c, 1, true, 3, 1, 2, 5), Base(4096) + index * kElem);
  EXPECT_EQ(Element(c, 0, false, 0, 0, 0, 0), Base(0));
  EXPECT_TRUE(c.pieces_contiguous());
  EXPECT_TRUE(ValidatePagedKvCache(c).ok());
}

TEST(KvLayout, FlashInferNhdIsBlocksByTwoByTokensByHeadsByDim) {
  std::vector<void*> bases = {Base(64)};
  const PagedKvCache c = FlashInferNhdLayout(bases, kTokens, kHeads, kDim, kElem);
  // [num_blocks, 2, block_tokens, kv_heads, head_dim]: V of block 4, token 3, head 1, dim 7.
  const size_t index = (((4 * 2 + 1) * kTokens + 3) * kHeads + 1) * kDim + 7;
  EXPECT_EQ(Element(c, 0, true, 4, 3, 1, 7), Base(64) + index * kElem);
  EXPECT_TRUE(c.pieces_contiguous());
  EXPECT_TRUE(ValidatePagedKvCache(c).ok());
}

TEST(KvLayout, FlashInferHndIsBlocksByTwoByHeadsByTokensByDim) {
  std::vector<void*> bases = {Base(0)};
  const PagedKvCache c = FlashInferHndLayout(bases, kTokens, kHeads, kDim, kElem);
  // [num_blocks, 2, kv_heads, block_tokens, head_dim]: K of block 2, token 3, head 1, dim 4.
  const size_t index = (((2 * 2 + 0) * kHeads + 1) * kTokens + 3) * kDim + 4;
  EXPECT_EQ(Element(c, 0, false, 2, 3, 1, 4), Base(0) + index * kElem);
  EXPECT_FALSE(c.pieces_contiguous());  // rows of one piece are head-major, the payload token-major
  EXPECT_TRUE(ValidatePagedKvCache(c).ok());
  EXPECT_TRUE(FlashInferHndLayout(bases, kTokens, 1, kDim, kElem).pieces_contiguous());
}

TEST(KvLayout, SglangIsTokensByHeadsByDimInSeparateKAndVBuffers) {
  std::vector<void*> k = {Base(0), Base(8192)}, v = {Base(16384), Base(24576)};
  const PagedKvCache c = SglangMhaLayout(k, v, kTokens, kHeads, kDim, kElem);
  // [num_tokens, kv_heads, head_dim] with page p = tokens [p * block_tokens, ...): V of layer 1,
  // block 2, token 1 (token 9 of the buffer), head 0, dim 6.
  const size_t index = ((2 * kTokens + 1) * kHeads + 0) * kDim + 6;
  EXPECT_EQ(Element(c, 1, true, 2, 1, 0, 6), Base(24576) + index * kElem);
  EXPECT_TRUE(c.pieces_contiguous());
  EXPECT_TRUE(ValidatePagedKvCache(c).ok());
}

TEST(KvLayout, PieceAndPayloadBytesOfALlamaEightBBlock) {
  std::vector<void*> bases(32, Base(0));
  const PagedKvCache c = VllmLayout(bases, 1000, 16, 8, 128, 2);
  EXPECT_EQ(c.row_bytes(), 256u);
  EXPECT_EQ(c.piece_bytes(), 32u << 10);
  EXPECT_EQ(c.payload_bytes(), 2u << 20);
}

// Validation's message, or "OK".
std::string Why(const PagedKvCache& c) {
  const absl::Status s = ValidatePagedKvCache(c);
  if (s.ok()) return "OK";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

PagedKvCache Good() {
  std::vector<void*> bases = {Base(0), Base(8192)};
  return VllmLayout(bases, kBlocks, kTokens, kHeads, kDim, kElem);
}

bool Says(const PagedKvCache& c, const std::string& words) {
  return Why(c).find(words) != std::string::npos;
}

TEST(KvLayout, ValidationNamesAZeroSize) {
  EXPECT_EQ(Why(Good()), "OK");
  for (uint32_t PagedKvCache::*field : {&PagedKvCache::block_tokens, &PagedKvCache::kv_heads,
                                        &PagedKvCache::head_dim, &PagedKvCache::elem_bytes}) {
    PagedKvCache c = Good();
    c.*field = 0;
    EXPECT_TRUE(Says(c, " is 0")) << Why(c);
  }
  PagedKvCache c = Good();
  c.elem_bytes = 0;
  EXPECT_TRUE(Says(c, "elem_bytes is 0")) << Why(c);
  c = Good();
  c.layers.clear();
  EXPECT_TRUE(Says(c, "layers is empty")) << Why(c);
}

TEST(KvLayout, ValidationRejectsStridesThatOverlapRowsOrBlocks) {
  PagedKvCache c = Good();
  c.head_stride = static_cast<int64_t>(c.row_bytes()) - 2;  // heads of one token overlap
  EXPECT_TRUE(Says(c, "head_stride")) << Why(c);
  c = Good();
  c.token_stride = c.head_stride * 2;  // token t+1 starts inside token t's third head
  EXPECT_TRUE(Says(c, "token_stride")) << Why(c);
  c = Good();
  c.block_stride -= 2;
  EXPECT_TRUE(Says(c, "block_stride")) << Why(c);
  c = Good();
  c.head_stride = 0;
  EXPECT_TRUE(Says(c, "head_stride 0")) << Why(c);
  c = Good();
  c.token_stride = -c.token_stride;
  EXPECT_FALSE(Why(c) == "OK");
  c = Good();
  c.block_stride = 0;
  EXPECT_TRUE(Says(c, "block_stride 0")) << Why(c);
}

TEST(KvLayout, ValidationAcceptsAnyStrideOfASizeOneDimension) {
  std::vector<void*> bases = {Base(0)};
  PagedKvCache c = FlashInferHndLayout(bases, kTokens, 1, kDim, kElem);
  c.head_stride = 0;  // one head: never stepped over
  EXPECT_EQ(Why(c), "OK");
}

TEST(KvLayout, ValidationNamesAMissingPointer) {
  PagedKvCache c = Good();
  c.layers[1].v = nullptr;
  EXPECT_TRUE(Says(c, "layers[1].v is null")) << Why(c);
  c = Good();
  c.layers[0].k = nullptr;
  EXPECT_TRUE(Says(c, "layers[0].k is null")) << Why(c);
  std::vector<void*> k = {Base(0), Base(4096)}, v = {Base(8192)};
  c = SglangMhaLayout(k, v, kTokens, kHeads, kDim, kElem);
  ASSERT_EQ(c.num_layers(), 2u);
  EXPECT_TRUE(Says(c, "layers[1].v is null")) << Why(c);
  std::vector<void*> null_base = {nullptr};
  c = VllmLayout(null_base, kBlocks, kTokens, kHeads, kDim, kElem);
  EXPECT_TRUE(Says(c, "layers[0].k is null")) << Why(c);
}

}  // namespace
}  // namespace kvtier
