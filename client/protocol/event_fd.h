// EventFd: a doorbell (eventfd(2)) one process rings and another waits on (DESIGN.md "Process
// model and protocol": woken by eventfd only when the other side sleeps; spsc_ring.h says when).
//
// Non-blocking underneath: Signal never blocks (a counter that is already at its maximum means a
// wake is pending anyway), Wait polls until the counter is non-zero and consumes it. Wakes may be
// spurious; callers recheck their condition. Thread-safety: Signal from any thread or process;
// one waiter at a time.
#pragma once

#include "client/protocol/unique_fd.h"
#include "common/status.h"

namespace kvtier::protocol {

class EventFd {
 public:
  // A new eventfd (EFD_NONBLOCK | EFD_CLOEXEC). Internal on failure.
  static absl::StatusOr<EventFd> Create();
  // Adopts `fd`, e.g. one received over SCM_RIGHTS. It should be a non-blocking eventfd; if it
  // is something else, Wait reports the error (a blocking one makes Signal block when full).
  explicit EventFd(UniqueFd fd) : fd_(std::move(fd)) {}

  // Adds one to the counter. Errors other than "counter full" are ignored: a doorbell that
  // cannot be rung is a peer that is gone, which the control socket reports.
  void Signal() const;
  // Waits until the counter is non-zero (or `timeout_ms` passes; -1: no limit) and resets it.
  // Returns true when woken, false on timeout. Internal on a poll/read error.
  absl::StatusOr<bool> Wait(int timeout_ms = -1) const;
  // Resets the counter without waiting; true if it was non-zero.
  bool Drain() const;

  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
};

}  // namespace kvtier::protocol
