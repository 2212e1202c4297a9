# The three build variants of kvtier's GPU code (DESIGN.md "GPU code: one source, two vendors"):
#   CPU-only (always; the GPU runtime answers "not built with GPU support"),
#   CUDA     (KVTIER_CUDA=ON; nvcc, sm_90 for Hopper),
#   HIP      (KVTIER_HIP=ON; Debian's ROCm 5.2 clang, gfx90a).
# Device code is one CUDA-spelled source list; kvtier_gpu_sources() compiles it as CUDA or as HIP.
# Host code that calls the vendor runtime is plain C++ compiled by the host compiler, with
# KVTIER_GPU_CUDA or KVTIER_GPU_HIP defined (kernels/gpu_vendor.h picks the headers).

if(KVTIER_CUDA AND KVTIER_HIP)
  message(FATAL_ERROR "KVTIER_CUDA and KVTIER_HIP are exclusive: configure one build directory per variant")
endif()

set(KVTIER_GPU_BACKEND "none")

if(KVTIER_CUDA)
  if(CCACHE_PROGRAM)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no C++20 flag for nvcc; device code needs only 17
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  set(KVTIER_GPU_BACKEND "cuda")
endif()

if(KVTIER_HIP)
  # Debian 12 installs hip-lang's CMake package under lib/x86_64-linux-gnu/cmake, where CMake 3.25's
  # HIP support does not look (it wants <rocm root>/lib/cmake/hip-lang). A ROCm root made of one
  # symlink in the build tree satisfies it; the package resolves its real path itself.
  set(_kvtier_rocm_root "${CMAKE_BINARY_DIR}/rocm-root")
  if(NOT CMAKE_HIP_COMPILER_ROCM_ROOT)
    file(MAKE_DIRECTORY "${_kvtier_rocm_root}/lib/cmake")
    file(CREATE_LINK "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang"
         "${_kvtier_rocm_root}/lib/cmake/hip-lang" SYMBOLIC)
    set(CMAKE_HIP_COMPILER_ROCM_ROOT "${_kvtier_rocm_root}" CACHE PATH "ROCm root for CMake's HIP language")
  endif()
  if(NOT CMAKE_HIP_COMPILER)
    find_program(KVTIER_HIP_CLANG NAMES clang++-15 REQUIRED)  # the clang Debian's hipcc drives
    set(CMAKE_HIP_COMPILER "${KVTIER_HIP_CLANG}")
  endif()
  set(CMAKE_PREFIX_PATH "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake;${CMAKE_PREFIX_PATH}")
  list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CMAKE_PREFIX_PATH)
  set(CMAKE_HIP_FLAGS
      "${CMAKE_HIP_FLAGS} --rocm-path=/usr --hip-device-lib-path=/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode")
  if(CCACHE_PROGRAM)
    set(CMAKE_HIP_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  endif()
  enable_language(HIP)
  set(CMAKE_HIP_STANDARD 17)  # same dialect as the CUDA build of the same sources
  set(CMAKE_HIP_STANDARD_REQUIRED ON)
  find_package(hip CONFIG REQUIRED)
  set(KVTIER_GPU_BACKEND "hip")
endif()

message(STATUS "kvtier GPU backend: ${KVTIER_GPU_BACKEND}")

# kvtier_gpu_sources(TARGET DEVICE <.cu files> HOST <.cc files that call the vendor runtime>):
# adds both lists to TARGET in a GPU variant, compiling DEVICE as CUDA or HIP, and links the
# vendor runtime. In the CPU variant it adds nothing; the caller adds its CPU sources instead.
# Definitions, include paths and the runtime stay PRIVATE: targets that use TARGET compile exactly
# as in the CPU build (no vendor header can leak into them, and ccache shares their objects
# between the variants' build directories).
function(kvtier_gpu_sources target)
  cmake_parse_arguments(ARG "" "" "DEVICE;HOST" ${ARGN})
  if(KVTIER_GPU_BACKEND STREQUAL "none")
    return()
  endif()
  target_sources(${target} PRIVATE ${ARG_DEVICE} ${ARG_HOST})
  if(KVTIER_CUDA)
    target_compile_definitions(${target} PRIVATE KVTIER_GPU_CUDA)
    target_link_libraries(${target} PRIVATE CUDA::cudart)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Wall,-Wextra>)
  else()
    set_source_files_properties(${ARG_DEVICE} PROPERTIES LANGUAGE HIP)
    target_compile_definitions(${target} PRIVATE KVTIER_GPU_HIP __HIP_PLATFORM_AMD__)
    target_link_libraries(${target} PRIVATE hip::host)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:HIP>:-Wall -Wextra -Werror>)
  endif()
endfunction()
