// Internal to kernels/: device sources report launch and runtime errors as the vendor's integer
// code (so they need no abseil or fmt under nvcc/hipcc); host wrappers turn the code into a Status
// naming the error and what was being done.
#pragma once

#include <string_view>

#include "common/status.h"

namespace kvtier::gpu {

// OK for the vendor's success code (0 in both runtimes); otherwise Internal (Unavailable for "no
// device"), "<what>: <error name> (<error text>)". Clears the runtime's last-error slot.
absl::Status StatusFromVendorCode(int code, std::string_view what);

}  // namespace kvtier::gpu
