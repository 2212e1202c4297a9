// Structured logging to stderr for kvtier's long-running parts (tiers, daemon). One line per event:
// time, level, component, message. The daemon issue adds SIGHUP reopening and a configurable level;
// the call sites stay as they are.
//
//   KVTIER_LOG(kInfo, "t1", "segment of {} bytes on NUMA node {}", bytes, node);
//
// Thread-safe. Messages below the current level are not formatted.
//
// Text from outside the process (a client's model_id or client_name, a path it named) goes through
// EscapeForLog before it is formatted into a message, so a client can never start a line of its
// own. Write also escapes any control byte left in a message, so no call site can forge a line.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace kvtier::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Lines below `level` are dropped. Default: kInfo, or KVTIER_LOG_LEVEL from the environment
// (debug, info, warn, error, off) read once at first use.
void SetLevel(Level level);
bool Enabled(Level level);
// Writes one line. `component` names the part ("t1", "t2", "daemon").
// Control bytes in `message` (newline included) are written as \xNN: one call, one line.
void Write(Level level, std::string_view component, std::string_view message);

// `text` with every byte outside printable ASCII (control bytes, DEL, bytes >= 0x80) as \xNN and
// backslash as \\: one unambiguous line of ASCII, whatever bytes a client sent. For log lines and
// metric label values built from client-supplied strings.
std::string EscapeForLog(std::string_view text);

}  // namespace kvtier::log

#define KVTIER_LOG(level, component, ...)                                                     \
  do {                                                                                        \
    if (::kvtier::log::Enabled(::kvtier::log::Level::level)) {                                \
      ::kvtier::log::Write(::kvtier::log::Level::level, component, fmt::format(__VA_ARGS__)); \
    }                                                                                         \
  } while (0)
