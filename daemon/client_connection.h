// ClientConnection: the data plane of one connected client (DESIGN.md "Process model and
// protocol"). A worker thread of its own pops the client's submission ring, dispatches each
// request (request_dispatch.h) and pushes completions to the completion ring, polling while there
// is work and sleeping on the daemon's doorbell only when both rings are idle for `spin_us` — so
// while the daemon is busy no hot op makes a system call on either side.
//
// Completions of gets that wait for a promotion arrive on other threads; they are queued to the
// worker, which alone produces into the completion ring (single producer). The region and the
// queue are shared with those callbacks, so a get that completes after the client is gone writes
// into memory that still exists and releases its leases (Service::Get).
//
// A malformed request (or a ring whose indices the client corrupted) ends the connection: the
// worker posts a kInvalid completion where it can, stops, and reports the reason once through
// `on_fatal`; the server then logs it and closes the socket. Other clients never notice.
//
// Thread-safety: Stop may be called from any thread, once or more.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "client/protocol/event_fd.h"
#include "client/protocol/shm_region.h"
#include "daemon/service.h"
#include "daemon/spin_budget.h"

namespace kvtier {

namespace internal {
struct CompletionQueue;
}

struct ClientConnectionOptions {
  int spin_us = 50;  // how long an idle worker polls before it sleeps
  // Shared by every connection of a server: an idle worker polls only while it holds one of its
  // slots, else it sleeps at once (spin_budget.h). Null: every idle worker polls.
  std::shared_ptr<SpinBudget> spin_budget;
};

class ClientConnection {
 public:
  // Starts the worker. `daemon_bell` is the eventfd the client rings (the worker sleeps on it);
  // `client_bell` the one the worker rings when the client sleeps. `on_fatal` runs at most once,
  // on the worker thread, with the reason the connection must close.
  static absl::StatusOr<std::unique_ptr<ClientConnection>> Start(
      Service& service, std::shared_ptr<Session> session,
      std::shared_ptr<protocol::ShmRegion> region, protocol::EventFd daemon_bell,
      protocol::EventFd client_bell, const ClientConnectionOptions& options,
      std::function<void(const std::string&)> on_fatal);
  // Stops the worker (letting gets in flight finish for up to a few seconds) and closes the
  // session: its leases and open puts are given back.
  ~ClientConnection();
  void Stop();

  const Session& session() const { return *session_; }

 private:
  ClientConnection(Service& service, std::shared_ptr<Session> session,
                   std::shared_ptr<protocol::ShmRegion> region, protocol::EventFd daemon_bell,
                   protocol::EventFd client_bell, const ClientConnectionOptions& options,
                   std::shared_ptr<internal::CompletionQueue> queue,
                   std::function<void(const std::string&)> on_fatal);
  void Run();
  // Sleeps up to kFullCompletionRingPollMs, or until a get in flight completes: for when requests
  // wait but the completions owed already fill the client's completion ring.
  void WaitForCompletionRoom();
  void Fail(const std::string& reason);

  Service& service_;
  const std::shared_ptr<Session> session_;
  const std::shared_ptr<protocol::ShmRegion> region_;
  const protocol::EventFd daemon_bell_;
  const protocol::EventFd client_bell_;
  const ClientConnectionOptions options_;
  const std::shared_ptr<internal::CompletionQueue> queue_;
  std::function<void(const std::string&)> on_fatal_;
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

}  // namespace kvtier
