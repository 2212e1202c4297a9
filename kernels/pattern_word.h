// PatternWord, the one definition of kernels/pattern.h's data, shared by the kernel and the CPU
// reference. Device-safe: no runtime or abseil headers.
#pragma once

#include <cstdint>

#include "kernels/device_code.h"

namespace kvtier {

// splitmix64's finaliser of seed + w (the same mix as common/mix.h, usable on the device).
KVTIER_HOST_DEVICE inline uint64_t PatternWord(uint64_t seed, uint64_t w) {
  uint64_t x = seed + w;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace kvtier
