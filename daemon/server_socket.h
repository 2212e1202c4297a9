// The control socket's set-up for Server (server.h), apart from serving it: the limits a Hello is
// judged against, and binding the Unix socket. Internal to daemon/.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format off: <utility> must come first
#include <boost/asio.hpp>
// clang-format on
#include <cstdint>
#include <string>

#include "common/status.h"
#include "daemon/server.h"

namespace kvtier::internal {

// The limits of `options` against the defaults and the protocol's maxima; an error names the key.
absl::Status CheckServerLimits(const ServerOptions& options);

// Binds and listens on `path` with file mode `mode`. A stale socket (no daemon answers on it) is
// replaced; a live one, or a file that is not a socket, is an error naming the path (daemon.socket)
// and nothing is touched; as is a path too long for a Unix socket, or a chmod that fails.
absl::Status BindControlSocket(boost::asio::io_context& io,
                               boost::asio::local::stream_protocol::acceptor& acceptor,
                               const std::string& path, uint32_t mode);

}  // namespace kvtier::internal
