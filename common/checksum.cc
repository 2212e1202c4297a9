#include "common/checksum.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace kvtier {

// checksum_avx2.cc, compiled for AVX2: call only where the CPU has it.
uint64_t Xxh3Avx2(const void* data, size_t bytes);
uint64_t CopyAndXxh3Avx2(void* dst, const void* src, size_t bytes, bool stream);

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

uint64_t CopyAndChecksum(void* dst, const void* src, size_t bytes) {
  constexpr size_t kChunk = 64 * 1024;  // well inside L2 on any server CPU
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return CopyAndXxh3Avx2(dst, src, bytes, bytes >= kStreamCopyMinBytes);
#endif
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t off = 0; off < bytes; off += kChunk) {
    const size_t n = std::min(kChunk, bytes - off);
    std::memcpy(d + off, s + off, n);
    XXH3_64bits_update(&state, s + off, n);
  }
  return XXH3_64bits_digest(&state);
}

}  // namespace kvtier
