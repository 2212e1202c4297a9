// The daemon's log file: stderr (where common/log.h writes) pointed at a file, so that one SIGHUP
// after logrotate moves it makes the daemon write to a new file at the same path.
#pragma once

#include <string>

#include "common/status.h"

namespace kvtier {

// Opens `path` (appending; created with mode 0640) and makes it the process's stderr. Called at
// start and again on SIGHUP (from the signal loop, not from a signal handler). On error stderr is
// left as it was.
absl::Status RedirectStderrTo(const std::string& path);

}  // namespace kvtier
