# Compiler flags for kvtier's own targets. Third-party headers come in as SYSTEM includes through their
# imported targets, so -Werror applies to our code only.
function(kvtier_target_defaults target)
  # Host languages only: device sources (CUDA/HIP) get their own flags in kvtier_gpu_sources().
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wshadow
                         -Wnon-virtual-dtor -Wno-unused-parameter -Werror>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# Every size, count and offset that crosses the C ABI, the C++ client or the wire is range-checked
# before use, never narrowed silently (issue 11): for client/ and daemon/ the compiler flags every
# implicit conversion that can change a value; each narrowing left is an explicit cast after a
# check, or of a value bounded by construction, with a comment saying which.
function(kvtier_strict_conversions target)
  target_compile_options(${target} PRIVATE
                         $<$<COMPILE_LANGUAGE:C,CXX>:-Wconversion -Wsign-conversion>)
endfunction()

option(KVTIER_SANITIZE_THREAD "Build with ThreadSanitizer" OFF)
if(KVTIER_SANITIZE_THREAD)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

if(KVTIER_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
