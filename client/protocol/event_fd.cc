#include "client/protocol/event_fd.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "common/errno_text.h"

namespace kvtier::protocol {

absl::StatusOr<EventFd> EventFd::Create() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return absl::InternalError("eventfd: " + ErrnoText(errno));
  return EventFd(UniqueFd(fd));
}

void EventFd::Signal() const {
  const uint64_t one = 1;
  ssize_t n;
  do {
    n = ::write(fd_.get(), &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
}

bool EventFd::Drain() const {
  uint64_t value = 0;
  ssize_t n;
  do {
    n = ::read(fd_.get(), &value, sizeof(value));
  } while (n < 0 && errno == EINTR);
  return n == sizeof(value);
}

absl::StatusOr<bool> EventFd::Wait(int timeout_ms) const {
  for (;;) {
    if (Drain()) return true;
    if (errno != EAGAIN) return absl::InternalError("eventfd read: " + ErrnoText(errno));
    pollfd p{fd_.get(), POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::InternalError("eventfd poll: " + ErrnoText(errno));
    if (r == 0) return false;
    if (p.revents & (POLLERR | POLLNVAL)) {
      return absl::InternalError(fmt::format("eventfd poll: revents 0x{:x}", p.revents));
    }
  }
}

}  // namespace kvtier::protocol
