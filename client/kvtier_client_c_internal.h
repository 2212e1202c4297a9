// Internal to the C ABI (kvtier_client_c.h): what its source files share. Not installed.
#pragma once

#include <memory>
#include <string>

#include "client/gpu_client.h"
#include "client/kvtier_client.h"
#include "client/kvtier_client_c.h"
#include "common/status.h"

struct kvtier_client {
  std::unique_ptr<kvtier::client::Client> impl;
};
struct kvtier_gpu {
  std::unique_ptr<kvtier::client::GpuClient> impl;
};

namespace kvtier::client::c_abi {

// This thread's message for kvtier_last_error.
extern thread_local std::string last_error;
// Records `status`'s message for kvtier_last_error and returns its code (0 for OK is never passed).
int Fail(const absl::Status& status);
// 0 when p is not NULL; else Fail(InvalidArgument "<what> is NULL").
int Check(const void* p, const char* what);

}  // namespace kvtier::client::c_abi
