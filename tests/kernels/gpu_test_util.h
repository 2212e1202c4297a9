// For tests that need a GPU: they skip, with the reason in the test log, when this build has no GPU
// backend (the CPU variant, as on CI) or the machine has no usable device.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kernels/gpu_runtime.h"

#define KVTIER_REQUIRE_GPU()                                                   \
  do {                                                                         \
    const std::string kvtier_gpu_reason_ = ::kvtier::gpu::UnavailableReason(); \
    if (!kvtier_gpu_reason_.empty()) {                                         \
      GTEST_SKIP() << "needs a GPU: " << kvtier_gpu_reason_;                   \
    }                                                                          \
  } while (0)

// ASSERT on an absl::Status / StatusOr, printing its message on failure.
#define KVTIER_ASSERT_OK(expr)                                                \
  do {                                                                        \
    const auto& kvtier_s_ = (expr);                                           \
    ASSERT_TRUE(kvtier_s_.ok()) << ::kvtier::gpu_test::StatusText(kvtier_s_); \
  } while (0)

namespace kvtier::gpu_test {

inline std::string StatusText(const absl::Status& s) { return s.ToString(); }
template <typename T>
std::string StatusText(const absl::StatusOr<T>& s) {
  return s.status().ToString();
}

}  // namespace kvtier::gpu_test
