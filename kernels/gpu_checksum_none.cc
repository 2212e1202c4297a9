// CPU-only variant of kernels/gpu_checksum.h: there is no device to hash on.
#include "kernels/gpu_checksum.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<GpuChecksummer>> GpuChecksummer::Create() {
  return absl::FailedPreconditionError("GPU checksum: kvtier was built without a GPU backend");
}

}  // namespace kvtier
