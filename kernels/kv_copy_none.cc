// CPU-only variant of KvCopier: there is no device to copy on.
#include "kernels/kv_copy.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<KvCopier>> KvCopier::Create() {
  return absl::FailedPreconditionError("KvCopier: kvtier was built without a GPU backend");
}

}  // namespace kvtier
