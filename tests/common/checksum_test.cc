// PayloadChecksum and CopyAndChecksum are XXH3-64 whatever the CPU path, and the copy is exact.
#include "common/checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace kvtier {
namespace {

TEST(ChecksumTest, CopyAndChecksumCopiesExactlyAndHashesLikeTheLibrary) {
  std::mt19937_64 rng(5);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{65535}, size_t{65536},
                       size_t{65537}, size_t{200000}, size_t{2} << 20}) {
    std::vector<unsigned char> src(bytes + 1), dst(bytes + 1, 0xee);
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    const uint64_t sum = CopyAndChecksum(dst.data(), src.data() + 1, bytes);  // unaligned source
    EXPECT_EQ(sum, XXH3_64bits(src.data() + 1, bytes)) << bytes;
    EXPECT_EQ(sum, PayloadChecksum(src.data() + 1, bytes)) << bytes;
    EXPECT_EQ(std::memcmp(dst.data(), src.data() + 1, bytes), 0) << bytes;
    EXPECT_EQ(dst[bytes], 0xee) << "wrote past the end at " << bytes;
  }
}

TEST(ChecksumTest, LargeCopiesAreExactAtAnyAlignmentAndLength) {
  // From kStreamCopyMinBytes up the copy streams to a 32-byte aligned destination and uses plain
  // stores to any other (T1 slots are page aligned); either way the bytes and the hash are exact.
  std::mt19937_64 rng(7);
  const size_t base = kStreamCopyMinBytes;
  for (size_t dst_offset : {0, 1, 8, 31, 32, 33}) {
    for (size_t bytes : {base, base + 1, base + 31, base + 127, base + 65536 + 5}) {
      std::vector<unsigned char> src(bytes + 3), dst(bytes + 64 + 1, 0xee);
      for (auto& b : src) b = static_cast<unsigned char>(rng());
      const uint64_t sum = CopyAndChecksum(dst.data() + dst_offset, src.data() + 3, bytes);
      EXPECT_EQ(sum, XXH3_64bits(src.data() + 3, bytes)) << dst_offset << " " << bytes;
      EXPECT_EQ(std::memcmp(dst.data() + dst_offset, src.data() + 3, bytes), 0)
          << dst_offset << " " << bytes;
      for (size_t i = 0; i < dst_offset; ++i) ASSERT_EQ(dst[i], 0xee) << "wrote before the start";
      EXPECT_EQ(dst[dst_offset + bytes], 0xee) << "wrote past the end";
    }
  }
}

TEST(ChecksumTest, EveryLengthAroundXxh3BlockBoundariesHashesLikeTheLibrary) {
  // The fused loop copies and hashes 1 KiB blocks (16 stripes of 64 bytes), with a partial block
  // and an overlapping last stripe at the end; inputs up to 240 bytes take XXH3's short paths.
  // Streamed (aligned destination, kStreamCopyMinBytes and up) and plain stores both.
  std::mt19937_64 rng(11);
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 1300; ++n) lengths.push_back(n);
  for (size_t blocks : {2, 3, 16, 255, 256, 257}) {
    for (size_t delta : {-65, -64, -63, -1, 0, 1, 63, 64, 65})
      lengths.push_back(blocks * 1024 + delta);
  }
  for (size_t n : {size_t{kStreamCopyMinBytes} - 1, size_t{kStreamCopyMinBytes} + 1000,
                   size_t{2} << 20, (size_t{2} << 20) + 77}) {
    lengths.push_back(n);
  }
  std::vector<unsigned char> src((size_t{2} << 20) + 200);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  std::vector<unsigned char> dst_storage(src.size() + 128);
  const size_t aligned = (32 - reinterpret_cast<uintptr_t>(dst_storage.data()) % 32) % 32;
  for (size_t dst_offset : {aligned + 32, aligned + 40}) {
    for (size_t n : lengths) {
      std::fill(dst_storage.begin(), dst_storage.end(), 0xee);
      unsigned char* dst = dst_storage.data() + dst_offset;
      const uint64_t sum = CopyAndChecksum(dst, src.data() + 5, n);
      ASSERT_EQ(sum, XXH3_64bits(src.data() + 5, n)) << n << " bytes, dst offset " << dst_offset;
      ASSERT_EQ(std::memcmp(dst, src.data() + 5, n), 0) << n;
      ASSERT_EQ(dst[n], 0xee) << "wrote past the end at " << n;
      ASSERT_EQ(dst[-1], 0xee) << "wrote before the start at " << n;
    }
  }
}

}  // namespace
}  // namespace kvtier
