// Internal to kernels/ops/gpu device sources: programmatic dependent launch (PDL, CUDA on sm_90).
// A kernel launched by pdl::Launch may start while the kernel before it on the stream is still
// finishing: its blocks are scheduled as soon as every block of that kernel has called
// AllowDependents, run their prologue — work that reads nothing an earlier kernel writes, such as
// a projection's weights — and then wait in WaitForPrerequisites until the earlier kernel has
// completed and its writes are visible. Launch gaps between the few hundred short kernels of a
// decode step (replayed from a graph, which records these launches as programmatic edges) are
// what this hides.
//
// Contract for a kernel launched by pdl::Launch: it calls WaitForPrerequisites before it reads
// anything an earlier kernel wrote and before it writes anything; it may call AllowDependents at
// any point (early is what lets the next kernel overlap). Elsewhere — HIP, devices before sm_90 —
// the launch is a plain one and both calls do nothing (as on every device while
// SetProgrammaticLaunch, ops_gpu.h, has it off).
#pragma once

#include <utility>

#include "kernels/gpu_vendor.h"
#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch::pdl {

__device__ __forceinline__ void WaitForPrerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void AllowDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), allowed to overlap the kernel before it unless
// ProgrammaticLaunchOn() says no (launch.h). Returns the vendor's error code.
template <typename... Params, typename... Args>
int Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
           Args&&... args) {
#if defined(KVTIER_GPU_CUDA)
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = ProgrammaticLaunchOn() ? 1 : 0;
  return static_cast<int>(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
#else
  // clang-format splits the launch chevrons in a header.
  // clang-format off
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
  // clang-format on
  return static_cast<int>(cudaGetLastError());
#endif
}

}  // namespace kvtier::ops::gpu_launch::pdl
