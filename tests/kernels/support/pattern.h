// Deterministic data for GPU tests and benchmarks, filled where it lives (device memory or mapped
// pinned host memory) without a trip through the host. 8-byte word w of the pattern for `seed` is
// PatternWord(seed, w), little-endian; a trailing partial word holds that word's low bytes. The
// kernel and the CPU reference share PatternWord, and a test pins that they agree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "kernels/gpu_runtime.h"
#include "tests/kernels/support/pattern_word.h"

namespace kvtier {

// CPU reference: fills [dst, dst + bytes) with the pattern. Any alignment.
void FillPatternReference(void* dst, size_t bytes, uint64_t seed);

// Enqueues the same fill on `stream`. `dst` must be device memory or registered (mapped) host
// memory, 8-byte aligned. FailedPrecondition in the CPU-only variant.
absl::Status FillPattern(void* dst, size_t bytes, uint64_t seed, gpu::StreamHandle stream);

}  // namespace kvtier
