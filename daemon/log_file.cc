#include "daemon/log_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>

#include "common/errno_text.h"

namespace kvtier {

absl::Status RedirectStderrTo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        fmt::format("daemon.log_file: cannot open {}: {}", path, ErrnoText(errno)));
  }
  const int rc = ::dup2(fd, STDERR_FILENO);
  const int err = errno;
  ::close(fd);
  if (rc < 0) {
    return absl::InternalError(fmt::format("daemon.log_file: dup2: {}", ErrnoText(err)));
  }
  return absl::OkStatus();
}

}  // namespace kvtier
