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

}  // namespace kvtier
