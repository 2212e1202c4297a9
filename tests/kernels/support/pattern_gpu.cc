// GPU variant of FillPattern: checks arguments, launches, and turns the vendor code into a Status.
#include <fmt/format.h>

#include "kernels/launch_status.h"
#include "tests/kernels/support/pattern.h"
#include "tests/kernels/support/pattern_launch.h"

namespace kvtier {

absl::Status FillPattern(void* dst, size_t bytes, uint64_t seed, gpu::StreamHandle stream) {
  if (reinterpret_cast<uintptr_t>(dst) % 8 != 0) {
    return absl::InvalidArgumentError(
        fmt::format("FillPattern: destination {} is not 8-byte aligned", dst));
  }
  if (bytes == 0) return absl::OkStatus();
  return gpu::StatusFromVendorCode(LaunchFillPattern(dst, bytes, seed, stream),
                                   "FillPattern launch");
}

}  // namespace kvtier
