// Helpers for the T0 tests: registered host buffers (what T1's segment is to the GPU),
// deterministic per-slot payloads with a failure text that says where they differ, and a counter
// of asynchronous completions.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/gpu_runtime.h"
#include "tiers/storage_tier.h"

namespace kvtier::device_tier_test {

// Page-aligned host memory registered for DMA for its lifetime.
class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes)
      : bytes_(bytes), data_(static_cast<std::byte*>(std::aligned_alloc(4096, bytes))) {
    status_ = data_ ? gpu::HostRegister(data_, bytes_)
                    : absl::ResourceExhaustedError(fmt::format("aligned_alloc({})", bytes));
  }
  ~HostBuffer() {
    if (status_.ok()) (void)gpu::HostUnregister(data_);
    std::free(data_);
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  const absl::Status& status() const { return status_; }  // whether it is registered
  std::byte* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  std::byte* data_;
  absl::Status status_;
};

// Byte `i` of the payload for (`seed`, `slot`): a mix, so a shifted, swapped or stale copy differs.
inline uint8_t PatternByte(uint64_t seed, SlotId slot, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t{slot} << 40) ^ i;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<uint8_t>(x);
}

inline void FillPattern(std::byte* dst, size_t n, uint64_t seed, SlotId slot) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<std::byte>(PatternByte(seed, slot, i));
}

// "" when `got[0, n)` is the payload of (`seed`, `slot`); else where and how it differs.
inline std::string FirstDifference(const std::byte* got, size_t n, uint64_t seed, SlotId slot) {
  size_t first = n, count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<uint8_t>(got[i]) != PatternByte(seed, slot, i)) {
      if (first == n) first = i;
      ++count;
    }
  }
  if (count == 0) return "";
  return fmt::format(
      "payload of slot {} (seed {}): {} of {} bytes differ, the first at byte {}: got 0x{:02x}, "
      "want 0x{:02x}",
      slot, seed, count, n, first, static_cast<uint8_t>(got[first]),
      PatternByte(seed, slot, first));
}

// Counts `done` calls and keeps every error and the threads they ran on.
class Completions {
 public:
  IoDone Callback(std::string what) {
    return [this, what = std::move(what)](absl::Status status) {
      std::lock_guard<std::mutex> lock(mu_);
      ++count_;
      threads_.push_back(std::this_thread::get_id());
      if (!status.ok()) errors_.push_back(fmt::format("{}: {}", what, status.ToString()));
      cv_.notify_all();
    };
  }
  // Whether `n` callbacks have run. The deadline only keeps a broken tier from hanging the test
  // binary; it measures nothing.
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::minutes(2), [&] { return count_ >= n; });
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_;
  }
  // For failure messages: how many completed and the first errors.
  std::string Describe() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = fmt::format("{} completions, {} errors", count_, errors_.size());
    for (size_t i = 0; i < errors_.size() && i < 5; ++i) out += "\n  " + errors_[i];
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t count_ = 0;
  std::vector<std::string> errors_;
  std::vector<std::thread::id> threads_;
};

}  // namespace kvtier::device_tier_test
