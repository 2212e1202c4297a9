# tests/daemon metrics tests. A snippet: tests/daemon/CMakeLists.txt includes it with
# include(${CMAKE_CURRENT_LIST_DIR}/metrics.cmake) (kvtier_test comes from tests/CMakeLists.txt).
kvtier_test(metrics_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_test.cc
            LIBS kvtier_metrics kvtier_tiers PkgConfig::XXHASH)
target_compile_definitions(metrics_test PRIVATE KVTIER_TEST_VERSION="${PROJECT_VERSION}")
