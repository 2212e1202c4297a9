#include "common/checksum.h"

#include <xxhash.h>

namespace kvtier {

// checksum_avx2.cc, compiled for AVX2: call only where the CPU has it.
uint64_t Xxh3Avx2(const void* data, size_t bytes);

namespace {

using Xxh3Fn = uint64_t (*)(const void*, size_t);

uint64_t Xxh3Library(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

Xxh3Fn Choose() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return &Xxh3Avx2;
#endif
  return &Xxh3Library;
}

}  // namespace

uint64_t PayloadChecksum(const void* data, size_t bytes) {
  static const Xxh3Fn fn = Choose();
  return fn(data, bytes);
}

}  // namespace kvtier
