// kernels/gpu_checksum.h's layout check: plain arithmetic, in every variant.
#include <fmt/format.h>

#include "kernels/gpu_checksum.h"

namespace kvtier {
namespace {

bool Aligned8(int64_t v) { return v % 8 == 0; }

}  // namespace

absl::Status CheckChecksumLayout(const PagedKvCache& cache) {
  KVTIER_RETURN_IF_ERROR(ValidatePagedKvCache(cache));
  if (cache.payload_bytes() > UINT32_MAX) {
    return absl::InvalidArgumentError(
        fmt::format("GPU checksum: a payload of {} bytes is 4 GiB or more", cache.payload_bytes()));
  }
  if (!Aligned8(static_cast<int64_t>(cache.row_bytes())) || !Aligned8(cache.block_stride) ||
      !Aligned8(cache.token_stride) || !Aligned8(cache.head_stride)) {
    return absl::InvalidArgumentError(
        "GPU checksum: row_bytes and every stride of the cache must be multiples of 8");
  }
  for (uint32_t l = 0; l < cache.num_layers(); ++l) {
    if (reinterpret_cast<uintptr_t>(cache.layers[l].k) % 8 != 0 ||
        reinterpret_cast<uintptr_t>(cache.layers[l].v) % 8 != 0) {
      return absl::InvalidArgumentError(
          fmt::format("GPU checksum: layer {}'s K or V base is not 8-byte aligned", l));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvtier
