// Control-socket I/O: frames with file descriptors attached (SCM_RIGHTS) over a Unix-domain
// stream socket, and the peer's credentials (SO_PEERCRED). docs/protocol.md "Handshake".
//
// SendFrame/RecvFrame are for blocking sockets (clients, tests), optionally bounded by a deadline
// (a peer that accepted and then never answers must not hang the caller). An event loop (the
// daemon's Asio server) uses SendWithFds/RecvWithFds, one sendmsg/recvmsg each, and assembles
// frames itself with DecodeFrameHeader.
//
// Received descriptors are always owned (UniqueFd) and close-on-exec (MSG_CMSG_CLOEXEC); a
// message whose control data was cut short (MSG_CTRUNC: more fds than room, or the process at its
// fd limit) is an error and whatever fds did arrive are closed, never leaked.
//
// Thread-safety: none per socket; distinct sockets are independent.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "client/protocol/frame_codec.h"
#include "client/protocol/unique_fd.h"
#include "common/status.h"

namespace kvtier::protocol {

inline constexpr size_t kMaxFdsPerMessage = 8;

// When a blocking frame transfer gives up; kNoDeadline: never.
using Deadline = std::chrono::steady_clock::time_point;
inline constexpr Deadline kNoDeadline = Deadline::max();

// One sendmsg of `bytes` with `fds` attached (at most kMaxFdsPerMessage). Returns the bytes sent
// (the kernel may send fewer; fds go with the first byte, so send the rest without them). EAGAIN
// is Unavailable; EPIPE/ECONNRESET are Unavailable too; other errors Internal. MSG_NOSIGNAL.
absl::StatusOr<size_t> SendWithFds(int sock, absl::Span<const std::byte> bytes,
                                   absl::Span<const int> fds);
// One recvmsg into `buffer`, appending any fds that come with it to `fds`. Returns the bytes read;
// 0 means the peer closed. Errors: InvalidArgument for MSG_CTRUNC, for more than max_fds in total,
// or for control data other than SCM_RIGHTS (received fds are closed); Unavailable for EAGAIN.
absl::StatusOr<size_t> RecvWithFds(int sock, absl::Span<std::byte> buffer, size_t max_fds,
                                   std::vector<UniqueFd>* fds);

// Blocking: sends all of `frame` with `fds` attached to its first byte. With a deadline it waits
// (poll) for room before each sendmsg and returns DeadlineExceeded once the deadline has passed;
// a sendmsg that finds less room than it needs may still block (bound it with SO_SNDTIMEO).
absl::Status SendFrame(int sock, absl::Span<const std::byte> frame, absl::Span<const int> fds = {},
                       Deadline deadline = kNoDeadline);

struct ReceivedFrame {
  FrameInfo info;
  std::vector<std::byte> payload;  // info.payload_bytes bytes
  std::vector<UniqueFd> fds;       // every fd that arrived with the frame's bytes
};
// Blocking: reads one whole frame (header, then payload) and the fds that came with it.
// Unavailable("peer closed") at a clean end of stream between frames; DataLoss if the stream ends
// inside a frame; DeadlineExceeded when the whole frame has not arrived by `deadline` (the fds of
// a frame cut short are closed); the header's decoding errors (frame_codec.h) as they are.
absl::StatusOr<ReceivedFrame> RecvFrame(int sock, size_t max_fds, Deadline deadline = kNoDeadline);

// The connected peer's pid, uid and gid (SO_PEERCRED). Internal on failure.
absl::StatusOr<ucred> PeerCredentials(int sock);

}  // namespace kvtier::protocol
