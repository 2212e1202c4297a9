// Daemon: one running kvtierd, its parts built from a validated config and torn down in order
// (DESIGN.md "Process model and protocol"):
//
//   metrics endpoint -> tier manager (T1, T2 + warm restart; it reports each promotion and
//   demotion to the metrics) -> key scope (secret in the data directory) -> service (+ lookup
//   recorder) -> control socket.
//
// Stop order is the reverse: stop accepting and close every client (each after its gets in
// flight finish, giving back leases and open puts); with daemon.flush_on_stop (and a T2), write
// T1's blocks that have no T2 copy to T2, for at most daemon.flush_on_stop_seconds; the metrics
// page stops reading the tiers, the tier manager finishes moves in flight (still reporting them)
// and closes T2 with its metadata flushed — so a SIGTERM'd daemon restarts with every block it had
// committed to T2, and with flush_on_stop every block it held — and last the metrics endpoint
// stops.
//
// Thread-safety: Start and the destructor from one thread; Run blocks that thread.
#pragma once

#include <memory>

#include "common/status.h"
#include "daemon/config.h"

namespace kvtier {

class Daemon {
 public:
  // Errors name the setting or the part that failed (tiers, socket, metrics address). A start that
  // fails removes the T2 files it created (they hold nothing yet) and leaves every other file.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonConfig& config);
  ~Daemon();
  // Serves until SIGTERM or SIGINT. SIGHUP reopens daemon.log_file and daemon.record_file (after
  // log rotation) and goes on.
  void RunUntilSignalled();

  class Parts;

 private:
  explicit Daemon(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace kvtier
