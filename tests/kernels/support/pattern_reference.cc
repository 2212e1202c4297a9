#include <cstring>

#include "tests/kernels/support/pattern.h"

namespace kvtier {

void FillPatternReference(void* dst, size_t bytes, uint64_t seed) {
  auto* out = static_cast<unsigned char*>(dst);
  const size_t words = bytes / 8;
  for (size_t w = 0; w < words; ++w) {
    const uint64_t v = PatternWord(seed, w);
    std::memcpy(out + w * 8, &v, 8);  // x86-64 and every GPU host kvtier targets are little-endian
  }
  if (bytes % 8 != 0) {
    const uint64_t v = PatternWord(seed, words);
    std::memcpy(out + words * 8, &v, bytes % 8);
  }
}

}  // namespace kvtier
