// Structured logging to stderr for kvtier's long-running parts (tiers, daemon). One line per event:
// time, level, component, message. The daemon issue adds SIGHUP reopening and a configurable level;
// the call sites stay as they are.
//
//   KVTIER_LOG(kInfo, "t1", "segment of {} bytes on NUMA node {}", bytes, node);
//
// Thread-safe. Messages below the current level are not formatted.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace kvtier::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Lines below `level` are dropped. Default: kInfo, or KVTIER_LOG_LEVEL from the environment
// (debug, info, warn, error, off) read once at first use.
void SetLevel(Level level);
bool Enabled(Level level);
// Writes one line. `component` names the part ("t1", "t2", "daemon").
void Write(Level level, std::string_view component, std::string_view message);

}  // namespace kvtier::log

#define KVTIER_LOG(level, component, ...)                                                     \
  do {                                                                                        \
    if (::kvtier::log::Enabled(::kvtier::log::Level::level)) {                                \
      ::kvtier::log::Write(::kvtier::log::Level::level, component, fmt::format(__VA_ARGS__)); \
    }                                                                                         \
  } while (0)
