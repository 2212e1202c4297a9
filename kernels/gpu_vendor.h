// The one place in kvtier that includes a GPU vendor runtime (DESIGN.md "GPU code: one source, two
// vendors"). Code is written in CUDA spelling; under HIP the names it uses are mapped here to their
// hip* twins, so kernels and host calls compile unchanged for both vendors.
//
// Who includes this: only GPU-variant translation units — device sources (*.cu, compiled as CUDA or
// HIP) and the host wrappers in kernels/gpu_runtime.cc. Everything else in kvtier goes through
// kernels/gpu_runtime.h, which has no vendor types and works in the CPU variant too.
//
// Rules for code under it: test capabilities (warp size is a value read from the device or the
// `warpSize` builtin, never the literal 32), never the vendor name; add a mapping below before
// using a new runtime name.
#pragma once

#if defined(KVTIER_GPU_CUDA) && defined(KVTIER_GPU_HIP)
#error "KVTIER_GPU_CUDA and KVTIER_GPU_HIP are exclusive"
#endif

#if defined(KVTIER_GPU_CUDA)

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#else
#include <cuda_runtime_api.h>
#endif

#elif defined(KVTIER_GPU_HIP)

#if defined(__HIPCC__)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <hip/hip_runtime_api.h>
#endif

// Types and constants.
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNotReady hipErrorNotReady
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorInvalidDevice hipErrorInvalidDevice
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaStream_t hipStream_t
#define cudaEvent_t hipEvent_t
#define cudaIpcMemHandle_t hipIpcMemHandle_t
#define cudaDeviceProp hipDeviceProp_t
#define cudaMemcpyDefault hipMemcpyDefault
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaEventDefault hipEventDefault
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaHostRegisterPortable hipHostRegisterPortable
#define cudaHostRegisterMapped hipHostRegisterMapped
#define cudaIpcMemLazyEnablePeerAccess hipIpcMemLazyEnablePeerAccess
#define cudaDevAttrWarpSize hipDeviceAttributeWarpSize
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrMaxThreadsPerBlock hipDeviceAttributeMaxThreadsPerBlock
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes

// Functions.
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaPeekAtLastError hipPeekAtLastError
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceGetPCIBusId hipDeviceGetPCIBusId
#define cudaDeviceGetByPCIBusId hipDeviceGetByPCIBusId
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocHost hipHostMalloc
#define cudaFreeHost hipHostFree
#define cudaHostRegister hipHostRegister
#define cudaHostUnregister hipHostUnregister
#define cudaHostGetDevicePointer hipHostGetDevicePointer
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemsetAsync hipMemsetAsync
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventQuery hipEventQuery
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaIpcGetMemHandle hipIpcGetMemHandle
#define cudaIpcOpenMemHandle hipIpcOpenMemHandle
#define cudaIpcCloseMemHandle hipIpcCloseMemHandle
#define cudaFuncSetAttribute(func, attr, value) \
  hipFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value)

// Device intrinsics. ROCm 5.2's warp shuffles take no member mask (a wavefront executes in lock
// step); the mask of the CUDA spelling is dropped. The width argument defaults to warpSize in both.
#define __shfl_xor_sync(mask, ...) __shfl_xor(__VA_ARGS__)
#define __shfl_sync(mask, ...) __shfl(__VA_ARGS__)
// A wavefront's lanes run in lock step and see each other's LDS writes in program order; only the
// compiler must not move memory accesses across the point.
#define __syncwarp(...) __builtin_amdgcn_wave_barrier()

#else
#error "gpu_vendor.h is for GPU-variant sources only (KVTIER_GPU_CUDA or KVTIER_GPU_HIP)"
#endif
