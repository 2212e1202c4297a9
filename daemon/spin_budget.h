// SpinBudget: how many connection threads may poll their idle rings at the same time.
//
// A connection thread polls for `spin_us` before it sleeps on its doorbell, so that a client's
// next request is seen without a wake-up (DESIGN.md: hot ops make no system call while the daemon
// is busy). Polling pays only while the poller has a CPU to itself: with more connections than
// CPUs, every polling thread takes a CPU from a client that is copying a payload or from a
// connection that has work. So the right to poll is a counted resource: a thread that finds no
// slot free sleeps at once, and the clients it serves pay one wake-up per request instead.
//
// Thread-safe; lock-free.
#pragma once

#include <atomic>

namespace kvtier {

class SpinBudget {
 public:
  // `slots` threads may poll at once; 0 means none ever polls.
  explicit SpinBudget(int slots) : free_(slots) {}

  // Takes a slot if one is free.
  bool TryAcquire() {
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
};

// The default number of slots: half the CPUs this process may run on (at least one), leaving the
// other half to the clients the polling threads serve.
int DefaultSpinSlots();

}  // namespace kvtier
