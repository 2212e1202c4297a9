// KVTIER_HOST_DEVICE: marks a small inline function that GPU kernels and host code share (a CPU
// reference and its kernel computing the same thing; common/mix.h). Vendor neutral: no runtime
// header is included here, and host-only builds see nothing.
#pragma once

// A function callable on the host and, when compiled by a GPU compiler, on the device: how a
// CPU reference and its kernel share one definition of what they compute.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define KVTIER_HOST_DEVICE __host__ __device__
#else
#define KVTIER_HOST_DEVICE
#endif
