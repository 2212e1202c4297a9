// CopyKvReference (kernels/kv_copy.h) on host memory, for every layout of kernels/kv_layout.h:
// payload bytes are [layer][k,v][token][head][dim], a gather followed by a scatter into a fresh
// cache gives back exactly the gathered blocks, and no other byte of the cache is written.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/kv_copy.h"
#include "tests/kernels/kv_test_util.h"
#include "tests/kernels/support/pattern.h"

namespace kvtier {
namespace {

using kv_test::Layout;

class KvCopyReferenceLayouts : public testing::TestWithParam<Layout> {};

// A small shape with heads and tokens both > 1, so HND's transposition matters.
kv_test::Shape SmallShape() {
  kv_test::Shape s;
  s.layers = 3;
  s.num_blocks = 10;
  s.block_tokens = 4;
  s.kv_heads = 2;
  s.head_dim = 8;
  s.elem_bytes = 2;
  return s;
}

TEST_P(KvCopyReferenceLayouts, GatherThenScatterIntoAFreshCacheRestoresOnlyThoseBlocks) {
  const kv_test::Shape s = SmallShape();
  std::vector<unsigned char> source(s.cache_bytes()), fresh(s.cache_bytes(), 0);
  FillPatternReference(source.data(), source.size(), 42);
  const PagedKvCache src = kv_test::MakeCache(GetParam(), s, source.data());
  const PagedKvCache dst = kv_test::MakeCache(GetParam(), s, fresh.data());
  const std::vector<int32_t> blocks = {7, 2, 9, 4};
  std::vector<unsigned char> payload_memory(blocks.size() * src.payload_bytes(), 0xcd);
  std::vector<void*> payloads;
  for (size_t i = 0; i < blocks.size(); ++i) {
    payloads.push_back(payload_memory.data() + i * src.payload_bytes());
  }
  ASSERT_TRUE(CopyKvReference(src, KvCopyDirection::kCacheToPayload, blocks, payloads).ok());
  ASSERT_TRUE(CopyKvReference(dst, KvCopyDirection::kPayloadToCache, blocks, payloads).ok());

  // Every byte of the fresh cache is either a byte of a copied block, equal to the source, or
  // still zero.
  std::vector<unsigned char> want(s.cache_bytes(), 0);
  const PagedKvCache want_cache = kv_test::MakeCache(GetParam(), s, want.data());
  for (int32_t b : blocks) {
    for (uint32_t l = 0; l < s.layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        for (uint32_t t = 0; t < s.block_tokens; ++t) {
          for (uint32_t h = 0; h < s.kv_heads; ++h) {
            const int64_t off = (static_cast<char*>(kv == 0 ? src.layers[l].k : src.layers[l].v) -
                                 reinterpret_cast<char*>(source.data())) +
                                b * src.block_stride + t * src.token_stride + h * src.head_stride;
            std::memcpy(want.data() + off, source.data() + off, src.row_bytes());
          }
        }
      }
    }
  }
  const uint64_t diff = kv_test::FirstDifference(want.data(), fresh.data(), want.size());
  EXPECT_EQ(diff, want.size()) << kv_test::DescribeCacheOffset(want_cache, s, want.data(), diff);
}

TEST_P(KvCopyReferenceLayouts, PayloadIsLayerThenKvThenTokenThenHeadThenDim) {
  // Element (layer, kv, block, token, head, dim) of the cache holds a 16-bit code of all six.
  const kv_test::Shape s = SmallShape();
  std::vector<unsigned char> memory(s.cache_bytes(), 0);
  const PagedKvCache c = kv_test::MakeCache(GetParam(), s, memory.data());
  auto code = [](uint32_t l, uint32_t kv, uint32_t b, uint32_t t, uint32_t h, uint32_t d) {
    return static_cast<uint16_t>((((((l * 2 + kv) * 16 + b) * 4 + t) * 2 + h) * 8 + d) & 0xffff);
  };
  for (uint32_t l = 0; l < s.layers; ++l) {
    for (uint32_t kv = 0; kv < 2; ++kv) {
      for (uint32_t b = 0; b < s.num_blocks; ++b) {
        for (uint32_t t = 0; t < s.block_tokens; ++t) {
          for (uint32_t h = 0; h < s.kv_heads; ++h) {
            for (uint32_t d = 0; d < s.head_dim; ++d) {
              const uint16_t v = code(l, kv, b, t, h, d);
              char* p = static_cast<char*>(kv == 0 ? c.layers[l].k : c.layers[l].v) +
                        b * c.block_stride + t * c.token_stride + h * c.head_stride + d * 2;
              std::memcpy(p, &v, 2);
            }
          }
        }
      }
    }
  }
  std::vector<uint16_t> payload(c.payload_bytes() / 2);
  const std::vector<int32_t> blocks = {6};
  std::vector<void*> payloads = {payload.data()};
  ASSERT_TRUE(CopyKvReference(c, KvCopyDirection::kCacheToPayload, blocks, payloads).ok());
  // Row = 8 dims * 2 bytes = 16 bytes; piece = 4 tokens * 2 heads * 16 = 128 bytes; payload = 3
  // layers * 2 * 128 = 768 bytes. Offsets worked out by hand:
  //   layer 0 K token 0 head 0 dim 0 -> byte 0
  //   layer 0 K token 0 head 1 dim 3 -> byte 16 + 6 = 22
  //   layer 0 V token 1 head 0 dim 0 -> byte 128 + 32 = 160
  //   layer 2 V token 3 head 1 dim 7 -> byte 5 * 128 + (3 * 2 + 1) * 16 + 14 = 766 (the last)
  //   layer 1 K token 2 head 0 dim 5 -> byte 2 * 128 + 4 * 16 + 10 = 330
  EXPECT_EQ(c.payload_bytes(), 768u);
  EXPECT_EQ(payload[0 / 2], code(0, 0, 6, 0, 0, 0));
  EXPECT_EQ(payload[22 / 2], code(0, 0, 6, 0, 1, 3));
  EXPECT_EQ(payload[160 / 2], code(0, 1, 6, 1, 0, 0));
  EXPECT_EQ(payload[766 / 2], code(2, 1, 6, 3, 1, 7));
  EXPECT_EQ(payload[330 / 2], code(1, 0, 6, 2, 0, 5));
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, KvCopyReferenceLayouts,
                         testing::ValuesIn(kv_test::kAllLayouts),
                         [](const testing::TestParamInfo<Layout>& p) {
                           return std::string(kv_test::LayoutName(p.param));
                         });

TEST(KvCopyReference, RejectsMismatchedSpansNegativeBlocksAndNullPayloads) {
  const kv_test::Shape s = SmallShape();
  std::vector<unsigned char> memory(s.cache_bytes()), payload(s.layers * 2 * s.piece_bytes());
  const PagedKvCache c = kv_test::MakeCache(Layout::kVllm, s, memory.data());
  std::vector<void*> one = {payload.data()};
  const std::vector<int32_t> two = {1, 2}, negative = {-1};
  const std::vector<void*> null_payload = {nullptr};
  const std::vector<int32_t> ok_block = {1};
  auto code = [&](std::span<const int32_t> b, std::span<void* const> p) {
    return CopyKvReference(c, KvCopyDirection::kCacheToPayload, b, p).code();
  };
  EXPECT_EQ(code(two, one), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(negative, one), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ok_block, null_payload), absl::StatusCode::kInvalidArgument);
  PagedKvCache bad = c;
  bad.head_dim = 0;
  EXPECT_EQ(CopyKvReference(bad, KvCopyDirection::kCacheToPayload, ok_block, one).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ok_block, one), absl::StatusCode::kOk);
}

TEST(KvCopyReference, PathNamesAreDmaAndKernel) {
  EXPECT_STREQ(KvCopyPathName(KvCopyPath::kDma), "dma");
  EXPECT_STREQ(KvCopyPathName(KvCopyPath::kKernel), "kernel");
}

}  // namespace
}  // namespace kvtier
