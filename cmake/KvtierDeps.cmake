# Every third-party library kvtier links, found once here. All come from Debian packages installed by
# tools/setup.sh; docs/dependencies.md says why each is used.
find_package(absl REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_package(simdjson REQUIRED)
find_package(CLI11 REQUIRED)
find_package(tomlplusplus REQUIRED)  # the daemon's config; a compiled library (TOML_HEADER_ONLY=0)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(CAIRO REQUIRED IMPORTED_TARGET cairo)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
pkg_check_modules(ROCKSDB REQUIRED IMPORTED_TARGET rocksdb)  # the shared library; RocksDBConfig.cmake names only the static one
find_package(Boost 1.74 REQUIRED)  # Boost.Asio (header-only) for the daemon's control socket
find_package(prometheus-cpp CONFIG REQUIRED)  # prometheus-cpp::core (registry, text format), ::pull (HTTP exposer)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)  # the tokenizer's pre-tokenizer regexes
find_package(ICU REQUIRED COMPONENTS uc)  # the tokenizer's NFC normalizer
find_package(Threads REQUIRED)
if(KVTIER_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KVTIER_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
