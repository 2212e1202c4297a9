// Device side of tests/kernels/support/pattern.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/gpu_vendor.h"
#include "tests/kernels/support/pattern_launch.h"
#include "tests/kernels/support/pattern_word.h"

namespace kvtier {
namespace {

__global__ void FillPatternKernel(unsigned char* dst, size_t bytes, uint64_t seed) {
  const size_t words = bytes / 8;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  auto* out = reinterpret_cast<uint64_t*>(dst);
  for (size_t w = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
    out[w] = PatternWord(seed, w);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && bytes % 8 != 0) {
    const uint64_t v = PatternWord(seed, words);
    for (size_t i = 0; i < bytes % 8; ++i) dst[words * 8 + i] = static_cast<unsigned char>(v >> (8 * i));
  }
}

}  // namespace

int LaunchFillPattern(void* dst, size_t bytes, uint64_t seed, void* stream) {
  constexpr unsigned kThreads = 256;
  const size_t words = bytes / 8 + 1;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((words + kThreads - 1) / kThreads, 4096));
  FillPatternKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<unsigned char*>(dst), bytes, seed);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier
