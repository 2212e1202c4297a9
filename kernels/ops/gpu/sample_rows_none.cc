// CPU-only variant of kernels/ops/gpu/sample_rows.h: there is no device.
#include "kernels/ops/gpu/sample_rows.h"

namespace kvtier::ops::gpu {

absl::Status SampleRows(const float*, int64_t, const SampleRow*, int64_t, void*, int64_t, int32_t*,
                        StreamHandle) {
  return absl::FailedPreconditionError("SampleRows: kvtier was built without a GPU backend");
}

}  // namespace kvtier::ops::gpu
