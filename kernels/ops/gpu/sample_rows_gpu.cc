// GPU variant of kernels/ops/gpu/sample_rows.h: checks the sizes, launches.
#include <fmt/format.h>

#include <cstddef>

#include "kernels/launch_status.h"
#include "kernels/ops/gpu/ops_check.h"
#include "kernels/ops/gpu/sample_rows.h"
#include "kernels/ops/gpu/sample_rows_launch.h"

namespace kvtier::ops::gpu {

namespace launch = ::kvtier::ops::gpu_launch;
static_assert(sizeof(SampleRow) == sizeof(launch::SampleRowArgs) &&
              offsetof(SampleRow, step) == offsetof(launch::SampleRowArgs, step) &&
              offsetof(SampleRow, top_p) == offsetof(launch::SampleRowArgs, top_p));

absl::Status SampleRows(const float* logits, int64_t vocab, const SampleRow* rows, int64_t n,
                        void* workspace, int64_t workspace_bytes, int32_t* out,
                        StreamHandle stream) {
  namespace check = ::kvtier::ops::gpu_check;
  constexpr const char* kOp = "SampleRows";
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "vocab", vocab));
  KVTIER_RETURN_IF_ERROR(check::Positive(kOp, "rows", n));
  if (vocab > (int64_t{1} << 19)) {
    return absl::InvalidArgumentError(fmt::format("{}: vocab {} exceeds 2^19", kOp, vocab));
  }
  if (workspace_bytes < SampleRowsWorkspaceBytes(vocab, n)) {
    return absl::InvalidArgumentError(fmt::format("{}: workspace of {} bytes, {} needed", kOp,
                                                  workspace_bytes,
                                                  SampleRowsWorkspaceBytes(vocab, n)));
  }
  KVTIER_RETURN_IF_ERROR(check::Aligned16(kOp, "workspace", workspace));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "logits", logits));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "rows", rows));
  KVTIER_RETURN_IF_ERROR(check::NotNull(kOp, "out", out));
  const auto blocks = static_cast<int>(n < kSampleRowsMaxBlocks ? n : kSampleRowsMaxBlocks);
  const int code =
      launch::SampleRows(logits, vocab, reinterpret_cast<const launch::SampleRowArgs*>(rows), n,
                         blocks, static_cast<uint64_t*>(workspace), out, stream);
  return ::kvtier::gpu::StatusFromVendorCode(code, "SampleRows launch");
}

}  // namespace kvtier::ops::gpu
