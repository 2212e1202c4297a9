// Configuration of the remote tier's store (the `[remote]` section, docs/configuration.md):
// which nodes, how to authenticate, timeouts, pooling, the circuit breaker and the key prefix.
// Validated once, at start (DESIGN.md "Reliability rules": a clear error that names the setting).
//
// Thread-safety: a plain value; Validate and RouterOptions are const and read only the file named
// by password_file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tiers/remote/cluster_router.h"

namespace kvtier {

struct RemoteStoreOptions {
  // "host:port" of the store: the one node of a standalone store, or any nodes of a cluster (seeds:
  // the rest are learned from CLUSTER SLOTS).
  std::vector<std::string> nodes;
  // kStandalone (false), kCluster (true) or kAuto (ask the first node that answers).
  ClusterMode cluster = ClusterMode::kAuto;
  // ACL user; empty: the default user. Needs a password.
  std::string user;
  // The password, or a file holding it (one line; a trailing newline is dropped). At most one of
  // the two; neither means no AUTH.
  std::string password;
  std::string password_file;
  uint32_t connect_timeout_ms = 1000;        // in [1, 600000]
  uint32_t command_timeout_ms = 2000;        // per read or write of a batch, in [1, 600000]
  uint32_t pool_per_node = 4;                // idle connections kept per node, in [1, 1024]
  uint32_t max_pipeline = 16;                // commands in flight per connection, in [1, 4096]
  uint32_t reconnect_backoff_min_ms = 100;   // first wait before reconnecting to a node
  uint32_t reconnect_backoff_max_ms = 5000;  // >= reconnect_backoff_min_ms
  // Circuit breaker: after breaker_failures consecutive calls that failed outright (every item an
  // error: timeouts, refused connections, error replies), calls fail fast with Unavailable for
  // breaker_open_ms, then one call probes; a failed probe doubles the wait, up to
  // breaker_open_max_ms.
  uint32_t breaker_failures = 5;  // in [1, 1000000]
  uint32_t breaker_open_ms = 1000;
  uint32_t breaker_open_max_ms = 30000;  // >= breaker_open_ms, <= 3600000
  // Hash every put's payload and refuse one that does not match the checksum it came with (one
  // read pass over the payload). Off, a put with a checksum is stored as given (a put without one
  // is always hashed): a payload that does not match is then a counted miss for every reader,
  // never served, as for any value corrupted in the store.
  bool verify_puts = false;
  // Put before every key's 16 bytes. At most 64 bytes, no '{' or '}' (a hash tag would put every
  // key in one cluster slot). Daemons that share blocks use the same prefix.
  std::string key_prefix = "kvtier:";

  // OK, or every problem, one per line, each naming its setting, e.g.
  // "remote.nodes[1]: \"x\" is not host:port (port in [1, 65535])"; the code is the first
  // problem's.
  absl::Status Validate() const;
  // The router's options: nodes parsed, the password read from password_file. Call Validate first.
  absl::StatusOr<ClusterRouterOptions> RouterOptions() const;
};

}  // namespace kvtier
