// CPU-only variant of FillPattern: there is no device to fill.
#include "tests/kernels/support/pattern.h"

namespace kvtier {

absl::Status FillPattern(void*, size_t, uint64_t, gpu::StreamHandle) {
  return absl::FailedPreconditionError("FillPattern: kvtier was built without a GPU backend");
}

}  // namespace kvtier
