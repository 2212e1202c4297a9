#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

namespace kvtier::log {
namespace {

Level LevelFromEnv() {
  const char* v = std::getenv("KVTIER_LOG_LEVEL");
  if (v == nullptr) return Level::kInfo;
  const std::string s(v);
  if (s == "debug") return Level::kDebug;
  if (s == "warn") return Level::kWarn;
  if (s == "error") return Level::kError;
  if (s == "off") return Level::kOff;
  return Level::kInfo;
}

std::atomic<int>& CurrentLevel() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
    default:
      return "off";
  }
}

// `message` with its control bytes as \xNN (backslashes stay: EscapeForLog already doubled those of
// client text, and a message's own are the program's).
std::string EscapeControls(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

bool HasControls(std::string_view message) {
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return true;
  }
  return false;
}

}  // namespace

std::string EscapeForLog(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (byte < 0x20 || byte >= 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

void SetLevel(Level level) { CurrentLevel().store(static_cast<int>(level)); }

bool Enabled(Level level) {
  return static_cast<int>(level) >= CurrentLevel().load(std::memory_order_relaxed);
}

void Write(Level level, std::string_view component, std::string_view message) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm utc;
  gmtime_r(&ts.tv_sec, &utc);
  const std::string escaped = HasControls(message) ? EscapeControls(message) : std::string();
  if (!escaped.empty()) message = escaped;
  // One fmt::format, one fwrite: lines from several threads never interleave.
  const std::string line =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z {} [{}] {}\n", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                  ts.tv_nsec / 1000, LevelName(level), component, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace kvtier::log
