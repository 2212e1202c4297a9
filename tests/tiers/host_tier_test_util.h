// Helpers for tests of a T1 that grows in the background (issue 12, "T1 ready at once"): a gate
// that holds the growth at a chunk boundary (HostTierOptions::before_touch_for_test), so what the
// tiers do meanwhile is deterministic, and a bounded wait for slots to become ready.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <thread>

#include "tiers/host_tier.h"

namespace kvtier::testing {

// Holds every chunk from offset `from` on until released (at the latest when it goes out of scope,
// so a failed assertion never leaves the growth thread waiting forever). Declare it after the tier:
// it is destroyed first.
class Gate {
 public:
  explicit Gate(uint64_t from) : from_(from), open_(opened_.get_future().share()) {}
  ~Gate() { Open(); }
  void Open() {
    if (!is_open_.exchange(true)) opened_.set_value();
  }
  std::function<void(uint64_t)> Hook() {
    return [this, open = open_](uint64_t offset) {
      touched_.fetch_add(1);
      if (offset >= from_) open.wait();
    };
  }
  int touched() const { return touched_.load(); }  // chunks after the first that began touching

 private:
  const uint64_t from_;
  std::promise<void> opened_;
  std::shared_future<void> open_;
  std::atomic<bool> is_open_{false};
  std::atomic<int> touched_{0};
};

// Waits (at most 20 s, then fails) until `slots` of the tier's slots are ready.
inline void WaitForReadySlots(const HostTier& tier, uint32_t slots) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (tier.ready_slots() < slots && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(tier.ready_slots(), slots);
}

}  // namespace kvtier::testing
