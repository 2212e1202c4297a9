#include "client/protocol/fd_passing.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include "common/errno_text.h"

namespace kvtier::protocol {
namespace {

// Room for kMaxFdsPerMessage fds, aligned as cmsghdr needs.
union ControlBuffer {
  char bytes[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  cmsghdr align;
};

absl::Status SocketError(const char* call, int err) {
  if (err == EAGAIN || err == EWOULDBLOCK || err == EPIPE || err == ECONNRESET) {
    return absl::UnavailableError(fmt::format("{}: {}", call, ErrnoText(err)));
  }
  return absl::InternalError(fmt::format("{}: {}", call, ErrnoText(err)));
}

// Takes ownership of every fd in the control data (so none leaks), then checks it.
absl::Status CollectFds(msghdr& msg, size_t max_fds, std::vector<UniqueFd>* fds) {
  absl::Status status;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      status = absl::InvalidArgumentError(
          fmt::format("control message of level {} type {} (only SCM_RIGHTS is expected)",
                      c->cmsg_level, c->cmsg_type));
      continue;
    }
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->emplace_back(fd);
    }
  }
  if (status.ok() && (msg.msg_flags & MSG_CTRUNC)) {
    status = absl::InvalidArgumentError(
        "control data truncated (MSG_CTRUNC): too many fds sent, or no fds left in this process");
  }
  if (status.ok() && fds->size() > max_fds) {
    status = absl::InvalidArgumentError(
        fmt::format("{} fds received, at most {} expected", fds->size(), max_fds));
  }
  if (!status.ok()) fds->clear();  // closes them
  return status;
}

// Waits until `sock` is ready for `events` (or has hung up: the next call says how), or until
// `deadline` has passed (DeadlineExceeded). Returns at once at kNoDeadline.
absl::Status AwaitReady(int sock, short events, Deadline deadline) {
  if (deadline == kNoDeadline) return absl::OkStatus();
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    // Clamped into poll's int milliseconds: a far deadline is waited for in INT_MAX ms slices.
    const int ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
    pollfd p{sock, events, 0};
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return absl::OkStatus();
    if (r < 0 && errno != EINTR) return SocketError("poll", errno);
    if (r == 0 && ms < INT_MAX) return absl::DeadlineExceededError("the deadline passed");
  }
}

// Reads exactly buffer.size() bytes; `got_any` tells a clean end of stream from a cut frame.
absl::Status RecvExact(int sock, absl::Span<std::byte> buffer, size_t max_fds,
                       std::vector<UniqueFd>* fds, bool* got_any, Deadline deadline) {
  size_t done = 0;
  while (done < buffer.size()) {
    if (absl::Status ready = AwaitReady(sock, POLLIN, deadline); !ready.ok()) {
      return absl::Status(ready.code(),
                          fmt::format("{} before a whole frame came ({} of {} bytes "
                                      "of this part read)",
                                      std::string(ready.message()), done, buffer.size()));
    }
    KVTIER_ASSIGN_OR_RETURN(const size_t n, RecvWithFds(sock, buffer.subspan(done), max_fds, fds));
    if (n == 0) {
      if (done == 0 && !*got_any) return absl::UnavailableError("peer closed the connection");
      return absl::DataLossError(fmt::format(
          "peer closed the connection inside a frame ({} of {} bytes of this part read)", done,
          buffer.size()));
    }
    done += n;
    *got_any = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<size_t> SendWithFds(int sock, absl::Span<const std::byte> bytes,
                                   absl::Span<const int> fds) {
  if (fds.size() > kMaxFdsPerMessage) {
    return absl::InvalidArgumentError(
        fmt::format("{} fds in one message (limit {})", fds.size(), kMaxFdsPerMessage));
  }
  iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  ControlBuffer control;
  if (!fds.empty()) {
    std::memset(&control, 0, sizeof(control));
    msg.msg_control = control.bytes;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return SocketError("sendmsg", errno);
  return static_cast<size_t>(n);
}

absl::StatusOr<size_t> RecvWithFds(int sock, absl::Span<std::byte> buffer, size_t max_fds,
                                   std::vector<UniqueFd>* fds) {
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  ControlBuffer control;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof(control.bytes);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return SocketError("recvmsg", errno);
  KVTIER_RETURN_IF_ERROR(CollectFds(msg, max_fds, fds));
  return static_cast<size_t>(n);
}

absl::Status SendFrame(int sock, absl::Span<const std::byte> frame, absl::Span<const int> fds,
                       Deadline deadline) {
  size_t done = 0;
  while (done < frame.size()) {
    if (absl::Status ready = AwaitReady(sock, POLLOUT, deadline); !ready.ok()) {
      return absl::Status(ready.code(),
                          fmt::format("{} with {} of {} bytes of the frame sent",
                                      std::string(ready.message()), done, frame.size()));
    }
    KVTIER_ASSIGN_OR_RETURN(const size_t n, SendWithFds(sock, frame.subspan(done),
                                                        done == 0 ? fds : absl::Span<const int>()));
    done += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<ReceivedFrame> RecvFrame(int sock, size_t max_fds, Deadline deadline) {
  ReceivedFrame frame;
  std::byte header[sizeof(FrameHeader)];
  bool got_any = false;
  KVTIER_RETURN_IF_ERROR(RecvExact(sock, header, max_fds, &frame.fds, &got_any, deadline));
  KVTIER_ASSIGN_OR_RETURN(frame.info, DecodeFrameHeader(header));
  frame.payload.resize(frame.info.payload_bytes);
  KVTIER_RETURN_IF_ERROR(
      RecvExact(sock, absl::MakeSpan(frame.payload), max_fds, &frame.fds, &got_any, deadline));
  return frame;
}

absl::StatusOr<ucred> PeerCredentials(int sock) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::InternalError("getsockopt(SO_PEERCRED): " + ErrnoText(errno));
  }
  return cred;
}

}  // namespace kvtier::protocol
