# daemon/ metrics: kvtier_metrics, the /metrics endpoint and the op layer's recording API
# (daemon/metrics.h, docs/metrics.md). A snippet, not a directory: daemon/CMakeLists.txt includes it
# with include(${CMAKE_CURRENT_LIST_DIR}/metrics.cmake) so the daemon's targets can link it.
set(KVTIER_METRICS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics_tiers.cc
)
add_library(kvtier_metrics STATIC ${KVTIER_METRICS_SOURCES})
kvtier_target_defaults(kvtier_metrics)
target_compile_definitions(kvtier_metrics PRIVATE KVTIER_VERSION="${PROJECT_VERSION}")
target_link_libraries(kvtier_metrics
  PUBLIC kvtier_tiers kvtier_common absl::status absl::statusor absl::synchronization
         prometheus-cpp::core
  # civetweb (found by prometheus-cpp's config): metrics.cc takes its log to report bind errors.
  PRIVATE prometheus-cpp::pull civetweb::civetweb-cpp absl::strings fmt::fmt)
