// splitmix64's finaliser: a bijection on 64 bits with full avalanche. Used wherever sequential ids
// must be spread over all bits (admission filters' probes, synth's content ids). Its output is part
// of `kvtier synth`'s reproducible traces: do not change it. Usable in GPU kernels too.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace kvtier {

KVTIER_HOST_DEVICE inline uint64_t SplitMix64Finalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace kvtier
