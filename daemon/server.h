// Server: kvtierd's control plane (DESIGN.md "Process model and protocol"). A Unix-domain stream
// socket served with Boost.Asio on one thread:
//
//   accept -> SO_PEERCRED against the allowed uids/gids -> Hello (namespace, ring sizes) ->
//   a session, a shared region and two doorbells -> Welcome with 4 fds over SCM_RIGHTS ->
//   the client's data plane runs on its own worker (client_connection.h).
//
// After Welcome the socket carries nothing more in this protocol version: the daemon watches it
// only to learn that the client is gone (end of stream, however the process died), and then
// closes the client's session, which gives back its leases and open puts. Any bytes the client
// sends after Hello, a Hello that does not decode or asks for more than the limits allow, a client
// that is not allowed, or one too slow to say Hello get an Error frame with the reason, a log line,
// and a closed socket; other clients never notice. Client-supplied text reaches the log only
// through EscapeForLog (common/log.h).
//
// An accept that fails (out of file descriptors) is retried after a growing wait, with a log line
// per interval rather than per failure (accept_backoff.h); the queued clients are served once
// descriptors come back.
//
// Access. A peer is allowed if its uid is the daemon's own, 0, or in allowed_uids, or one of its
// groups (primary, or supplementary from the user database) is in allowed_gids; the socket file's
// mode (socket_mode) is a second fence. Whoever is allowed is trusted with the T1 memory it maps
// (docs/protocol.md "Trust and isolation"). With several pools the same rule is each pool's, and a
// client maps only the memory of the pool it got.
//
// Thread-safety: Start/Stop from one thread; clients() from any.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/client_connection.h"
#include "daemon/pool_access.h"
#include "daemon/service.h"

namespace kvtier {

// One memory pool the server serves: who may use it (pool_access.h) and the service over its
// tiers, which must outlive the server.
struct ServerPool {
  PoolAccess access;
  Service* service = nullptr;
};

struct ServerOptions {
  std::string socket_path;      // created at start; a stale socket file is replaced
  uint32_t socket_mode = 0660;  // file mode of the socket
  // Who may use the pool of Start(options, service), besides root and the daemon's own uid.
  std::vector<uid_t> allowed_uids;
  std::vector<gid_t> allowed_gids;
  // With several pools (Start(options, pools)): the pool of a client allowed in several that
  // names none in its Hello; empty or not one of them: such a client must name one. With one
  // (Start(options, service)): its name, which a Hello may name ("default" when empty).
  std::string default_pool;
  // Ring and arena sizes a client gets when its Hello asks for 0.
  uint32_t sq_entries = 256;
  uint32_t cq_entries = 256;
  uint32_t arena_bytes = 2u << 20;
  // What one client may take (each connection costs a thread and a shared region of its rings and
  // arena): a Hello asking for more entries per ring or more arena bytes, or one arriving while
  // max_connections clients are connected, is refused with ResourceExhausted naming the limit,
  // never trimmed. The maxima must be at least the defaults above and at most the protocol's
  // (client/protocol/wire_format.h); Start checks.
  uint32_t max_ring_entries = 4096;
  uint32_t max_arena_bytes = 64u << 20;
  uint32_t max_connections = 256;
  int hello_timeout_ms = 5000;  // a client must say Hello within this
  ClientConnectionOptions connection;
};

class Server {
 public:
  // Binds the socket (an error names the path: in use by a live daemon, no permission, too long)
  // and starts serving on a thread of its own.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       Service& service);
  // Serves several memory pools (DESIGN.md "Trust and isolation"): each client gets the pool its
  // Hello names, or the only one it may use (pool_access.h ChoosePool), and its Welcome carries
  // that pool's T1 segment and T0 handle only; its requests go to that pool's service. A peer
  // that may use no pool is refused at accept. options.allowed_uids/gids are not used.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       std::vector<ServerPool> pools);
  // Stop().
  ~Server();
  // Stops accepting, closes every client (each after its gets in flight finish), removes the
  // socket file, and joins the serving thread. Idempotent.
  void Stop();
  // Clients past Welcome and not yet closed.
  size_t clients() const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier
