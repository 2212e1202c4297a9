// SpinBudget: how many connection threads may poll their idle rings at the same time.
//
// A connection thread polls for `spin_us` before it sleeps on its doorbell, so that a client's
// next request is seen without a wake-up (DESIGN.md: hot ops make no system call while the daemon
// is busy). Polling pays only while the poller has a CPU to itself: with more connections than
// CPUs, every polling thread takes a CPU from a client that is copying a payload or from a
// connection that has work. So the right to poll is a counted resource: a thread that finds no
// slot free sleeps at once, and the clients it serves pay one wake-up per request instead. And
// once there are more connections than CPUs (each has a client that wants a CPU too), nobody
// polls: measured on 2 CPUs with 4 clients putting, one poller still cost 15-20% of put bandwidth.
//
// Thread-safe; lock-free.
#pragma once

#include <atomic>

namespace kvtier {

class SpinBudget {
 public:
  // `slots` threads may poll at once, while at most `max_connections` connections are open; 0
  // slots means none ever polls (the daemon's config never asks for that: daemon.spin_us = 0
  // turns polling off there, and daemon.spin_threads = 0 means the default).
  SpinBudget(int slots, int max_connections) : free_(slots), max_connections_(max_connections) {}

  // A connection's life: polling is allowed only while at most max_connections are open.
  void Join() { connections_.fetch_add(1, std::memory_order_relaxed); }
  void Leave() { connections_.fetch_sub(1, std::memory_order_relaxed); }

  // Takes a slot if one is free and the connections do not outnumber the CPUs.
  bool TryAcquire() {
    if (connections_.load(std::memory_order_relaxed) > max_connections_) return false;
    int free = free_.load(std::memory_order_relaxed);
    while (free > 0) {
      if (free_.compare_exchange_weak(free, free - 1, std::memory_order_acq_rel)) return true;
    }
    return false;
  }
  // Gives back a slot that TryAcquire took.
  void Release() { free_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  std::atomic<int> free_;
  std::atomic<int> connections_{0};
  const int max_connections_;
};

// The CPUs this process may run on (sched_getaffinity), at least 1.
int UsableCpus();
// The default number of slots: half of UsableCpus() (at least one), leaving the other half to the
// clients the polling threads serve.
int DefaultSpinSlots();

}  // namespace kvtier
