// XXH3-64 compiled for AVX2 from the inlined xxhash.h (see checksum.h for why). Everything in
// this file is AVX2 code: only checksum.cc calls it, after checking the CPU.
#if defined(__x86_64__)
#pragma GCC target("avx2")
#include <immintrin.h>  // xxhash.h includes it only when the whole build targets AVX2
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#endif
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace kvtier {

uint64_t Xxh3Avx2(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

uint64_t CopyAndXxh3Avx2(void* dst, const void* src, size_t bytes, size_t chunk) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = bytes - off < chunk ? bytes - off : chunk;
    __builtin_memcpy(d + off, s + off, n);
    XXH3_64bits_update(&state, s + off, n);
  }
  return XXH3_64bits_digest(&state);
}

}  // namespace kvtier
