// Internal to the pattern library: the launcher pattern_kernel.cu exports to pattern_gpu.cc.
// Returns the vendor's error code (0 = success).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvtier {

int LaunchFillPattern(void* dst, size_t bytes, uint64_t seed, void* stream);

}  // namespace kvtier
