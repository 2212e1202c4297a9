// DmaRegistration: makes a host memory range DMA-able by the GPU (page-locked and known to the
// driver) without holding up start-up (DESIGN.md "Tiers": registered in chunks, off the critical
// path). Registering 8 GiB in one cudaHostRegister call takes seconds and blocks everything; in
// chunks on a background thread the daemon serves CPU-side traffic meanwhile and the progress is
// visible.
//
// Backends: whatever kernels/gpu_runtime.h was built with (CUDA or HIP). Without one (the CPU-only
// variant) Start registers nothing, says so in the log, and reports done at once with
// BackendName() == "none".
//
// Errors (no device, driver refusal) end the registration early with a Status in result(); they
// never abort. The range stays usable as ordinary memory; transfers from it are merely slower.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "common/status.h"

namespace kvtier {

class DmaRegistration {
 public:
  // Whether this build has a GPU backend at all.
  static bool BackendAvailable();
  static const char* BackendName();  // "cuda", "hip" or "none"

  // Starts registering [base, base + size) in chunks of chunk_bytes (the last may be shorter) on a
  // background thread. The caller keeps the memory mapped until this object is destroyed.
  // Preconditions: base page-aligned, chunk_bytes a positive multiple of the page size.
  static std::unique_ptr<DmaRegistration> Start(void* base, size_t size, size_t chunk_bytes);

  // Stops after the chunk in progress, waits for the thread, and unregisters every registered
  // chunk; after it returns the memory may be unmapped.
  ~DmaRegistration();

  DmaRegistration(const DmaRegistration&) = delete;
  DmaRegistration& operator=(const DmaRegistration&) = delete;

  uint64_t registered_bytes() const { return registered_bytes_.load(std::memory_order_acquire); }
  uint64_t total_bytes() const { return size_; }
  // True once every chunk is registered, registration failed, or there is nothing to do.
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Blocks until done(); OK when the whole range is registered (or the build has no backend, in
  // which case registered_bytes() stays 0), else why it stopped.
  absl::Status Wait() const;
  // Seconds from Start to done (0 until done).
  double seconds() const;

 private:
  DmaRegistration(void* base, size_t size, size_t chunk_bytes);
  void Run();
  void Finish(absl::Status status);

  char* const base_;
  const size_t size_;
  const size_t chunk_bytes_;
  std::atomic<uint64_t> registered_bytes_{0};
  std::atomic<bool> done_{false};
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable done_cv_;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  double seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // joined in the destructor
};

}  // namespace kvtier
