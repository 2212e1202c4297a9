// PatternWord, the one definition of tests/kernels/support/pattern.h's data, shared by the kernel
// and the CPU reference. Device-safe: no runtime or abseil headers.
#pragma once

#include <cstdint>

#include "common/mix.h"

namespace kvtier {

// splitmix64's finaliser of seed + w.
KVTIER_HOST_DEVICE inline uint64_t PatternWord(uint64_t seed, uint64_t w) {
  return SplitMix64Finalize(seed + w);
}

}  // namespace kvtier
