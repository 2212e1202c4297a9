# The tsa preset (CMakePresets.json; tools/check.sh runs it): clang's thread-safety analysis of the
# code that locks absl::Mutex (client/, daemon/ and their tests). Every ABSL_GUARDED_BY member read
# or written without its mutex, every ABSL_EXCLUSIVE_LOCKS_REQUIRED function called without it,
# fails the build.
#
# It compiles only: kvtier_check_locks() gives each target named an object library of the same
# sources, flags, definitions and include paths plus -Wthread-safety, and the preset builds just
# those (the target kvtier_lock_check). So the check compiles none of what the targets link (parts
# of common/ and index/ do not build with clang), and with ccache a run compiles only what changed.
#
# tiers/ headers count as system headers here: tiers/ still guards members with std::mutex, which
# clang cannot check (libstdc++'s mutex carries no capability attribute), and would fail the check
# for that alone. Drop --system-header-prefix=tiers/ once tiers/ locks absl::Mutex.
include_guard(GLOBAL)

option(KVTIER_THREAD_SAFETY
       "Check lock annotations with clang's -Wthread-safety (the tsa preset; compile only)" OFF)

if(KVTIER_THREAD_SAFETY)
  add_custom_target(kvtier_lock_check)
endif()

# kvtier_check_locks(<target>...): call in the directory that defines the targets, after their
# sources are all given.
function(kvtier_check_locks)
  if(NOT KVTIER_THREAD_SAFETY)
    return()
  endif()
  foreach(target ${ARGN})
    get_target_property(sources ${target} SOURCES)
    set(check ${target}_locks)
    add_library(${check} OBJECT ${sources})
    foreach(property C_STANDARD C_STANDARD_REQUIRED C_EXTENSIONS)
      get_target_property(value ${target} ${property})
      if(NOT value STREQUAL "value-NOTFOUND")
        set_target_properties(${check} PROPERTIES ${property} ${value})
      endif()
    endforeach()
    target_include_directories(${check} PRIVATE
                               $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>)
    target_compile_definitions(${check} PRIVATE $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>)
    target_compile_options(${check} PRIVATE $<TARGET_PROPERTY:${target},COMPILE_OPTIONS>
                           -Wthread-safety -Werror=thread-safety --system-header-prefix=tiers/)
    # For the include paths and definitions of what the target links; an object library builds
    # none of it.
    target_link_libraries(${check} PRIVATE $<TARGET_PROPERTY:${target},LINK_LIBRARIES>)
    add_dependencies(kvtier_lock_check ${check})
  endforeach()
endfunction()
