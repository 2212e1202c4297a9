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

namespace {

// Copies with non-temporal (streaming) stores: the destination's cache lines are written whole
// without being read first, and do not push the source out of the cache. Against memcpy into memory
// that is not cached (a T1 slot), this moves about half the bytes over the memory bus (memcpy reads
// every destination line before writing it). Streaming stores are weakly ordered: the fence at the
// end keeps the request that publishes the block (a release store into the ring) from becoming
// visible before the payload.
void StreamCopy(unsigned char* d, const unsigned char* s, size_t n) {
#if !defined(__x86_64__)
  __builtin_memcpy(d, s, n);  // never called there (checksum.cc checks for AVX2); keeps it building
#else
  const size_t head = (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32;
  if (head >= n) {
    __builtin_memcpy(d, s, n);
    return;
  }
  __builtin_memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  for (; n >= 32; n -= 32, d += 32, s += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  }
  __builtin_memcpy(d, s, n);
  _mm_sfence();
#endif
}

}  // namespace

uint64_t CopyAndXxh3Avx2(void* dst, const void* src, size_t bytes, size_t chunk, bool stream) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = bytes - off < chunk ? bytes - off : chunk;
    if (stream) {
      StreamCopy(d + off, s + off, n);
    } else {
      __builtin_memcpy(d + off, s + off, n);
    }
    XXH3_64bits_update(&state, s + off, n);  // the chunk was just read: hashed from the cache
  }
  return XXH3_64bits_digest(&state);
}

}  // namespace kvtier
