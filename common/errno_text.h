// "No such file or directory (errno 2)": errno values in log lines and error messages.
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <string>

namespace kvtier {

inline std::string ErrnoText(int err) {
  return fmt::format("{} (errno {})", std::strerror(err), err);
}

}  // namespace kvtier
