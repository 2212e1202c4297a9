#include "daemon/server_socket.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "client/protocol/wire_format.h"
#include "common/errno_text.h"
#include "common/log.h"

namespace kvtier::internal {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;

absl::Status CheckServerLimits(const ServerOptions& o) {
  if (o.max_ring_entries < std::max(o.sq_entries, o.cq_entries) ||
      o.max_ring_entries > protocol::kMaxRingEntries) {
    return absl::InvalidArgumentError(
        fmt::format("daemon.max_ring_entries: {} is not in [{}, {}]", o.max_ring_entries,
                    std::max(o.sq_entries, o.cq_entries), protocol::kMaxRingEntries));
  }
  if (o.max_arena_bytes < o.arena_bytes || o.max_arena_bytes > protocol::kMaxArenaBytes) {
    return absl::InvalidArgumentError(fmt::format("daemon.max_arena_bytes: {} is not in [{}, {}]",
                                                  o.max_arena_bytes, o.arena_bytes,
                                                  protocol::kMaxArenaBytes));
  }
  if (o.max_connections == 0) {
    return absl::InvalidArgumentError("daemon.max_connections: must be > 0");
  }
  return absl::OkStatus();
}

absl::Status BindControlSocket(asio::io_context& io, Local::acceptor& acceptor,
                               const std::string& path, uint32_t mode) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(
        fmt::format("daemon.socket: '{}' must be a path of 1 to {} bytes", path,
                    sizeof(sockaddr_un::sun_path) - 1));
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          fmt::format("daemon.socket: {} exists and is not a socket; not replacing it", path));
    }
    Local::socket probe(io);
    boost::system::error_code ec;
    probe.connect(Local::endpoint(path), ec);
    if (!ec) {
      return absl::FailedPreconditionError(
          fmt::format("daemon.socket: {} is in use: another kvtierd is serving on it", path));
    }
    ::unlink(path.c_str());  // stale: left by a daemon that died
  }
  boost::system::error_code ec;
  acceptor.open(Local(), ec);
  if (!ec) acceptor.bind(Local::endpoint(path), ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        fmt::format("daemon.socket: cannot listen on {}: {}", path, ec.message()));
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("daemon.socket_mode: chmod {:o} {}: {}", mode, path, ErrnoText(errno)));
  }
  KVTIER_LOG(kInfo, "server", "listening on {} (mode {:o})", path, mode);
  return absl::OkStatus();
}

}  // namespace kvtier::internal
