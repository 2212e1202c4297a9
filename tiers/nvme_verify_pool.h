// A few threads that run the T2 tier's read verification (XXH3-64 of each payload) off the
// directories' completion threads. Internal to the T2 tier (nvme_tier_io.cc).
//
// Why: one completion thread per directory reaps every CQE of its device; hashing each payload
// there caps reads at one core's XXH3 speed (1-1.2 GB/s measured on the shared development VM,
// below the disk). The completion thread only hands the finished read over; the hash and the
// caller's `done` run here, N payloads at a time.
//
// Thread-safety: Post may be called from any thread, including from a posted task. Tasks run in
// FIFO order of posting, up to `threads` at once. The destructor runs every task posted before it
// returns (including tasks those tasks post), then joins the threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvtier {

class VerifyPool {
 public:
  explicit VerifyPool(uint32_t threads);
  ~VerifyPool();
  VerifyPool(const VerifyPool&) = delete;
  VerifyPool& operator=(const VerifyPool&) = delete;

  void Post(std::function<void()> task);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace kvtier
