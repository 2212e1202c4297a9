// Macros shared by device sources and the host code that mirrors them (CPU references). Vendor
// neutral: no runtime header is included here.
#pragma once

// A function callable on the host and, when compiled by a GPU compiler, on the device: how a
// CPU reference and its kernel share one definition of what they compute.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define KVTIER_HOST_DEVICE __host__ __device__
#else
#define KVTIER_HOST_DEVICE
#endif
