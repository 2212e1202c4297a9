// DmaRegistration: brings a host memory range into use chunk by chunk, in the background, so that
// a process serves from the first chunk while the rest is still being prepared (DESIGN.md "Tiers":
// T1 ready at once). For each chunk, in address order: fault it in (the caller's touch hook, which
// may use many threads), make it DMA-able by the GPU (page-locked and known to the driver), then
// report the bytes [0, end of chunk) ready (the caller's ready hook: T1 makes those slots
// allocatable). The first chunk alone is reported ready before it is registered: its registration
// creates the GPU context (~0.2 s on the H100), which a daemon need not wait for to serve; the
// driver stages a DMA from it until it is registered a moment later. Faulting chunk k + 1 in
// overlaps registering chunk k, so the whole range is ready in about max(touch, registration)
// instead of their sum. Registering 8 GiB in one cudaHostRegister call would take seconds and fault
// the pages in from one thread.
//
// Backends: whatever kernels/gpu_runtime.h was built with (CUDA or HIP). Without one (the CPU-only
// variant) chunks are touched and reported ready but registered nowhere, and BackendName() ==
// "none". A registration error (no device, driver refusal) is logged once and stops registering,
// not the growth: the rest is still touched and reported ready, usable as ordinary memory
// (transfers from it are merely slower); Wait() returns that error. A touch error (the kernel
// cannot back the pages) stops the growth where it is: the range stays usable up to ready_bytes().
//
// Thread-safety: every const method may be called from any thread while the background thread
// runs. The hooks run on that thread, one at a time, and must not destroy this object.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/status.h"

namespace kvtier {

class DmaRegistration {
 public:
  // Faults [begin, begin + bytes) in; non-OK stops the growth (ResourceExhausted: no memory).
  using TouchFn = std::function<absl::Status(char* begin, size_t bytes)>;
  // [base, base + ready_bytes) is usable now; called once per chunk with increasing values.
  using ReadyFn = std::function<void(uint64_t ready_bytes)>;

  // Whether this build has a GPU backend at all.
  static bool BackendAvailable();
  static const char* BackendName();  // "cuda", "hip" or "none"

  // Starts preparing [base, base + size) on a background thread, chunk i being [chunk_ends[i - 1],
  // chunk_ends[i]) (from 0 for i = 0). The caller keeps the memory mapped until this object is
  // destroyed. Preconditions: base page-aligned; chunk_ends increasing, page-aligned offsets, the
  // last equal to size.
  static std::unique_ptr<DmaRegistration> Start(void* base, size_t size,
                                                std::vector<size_t> chunk_ends, TouchFn touch,
                                                ReadyFn ready);

  // Stops after the chunk in progress, waits for the thread, and unregisters every registered
  // chunk; after it returns the memory may be unmapped. Bytes reported ready stay touched.
  ~DmaRegistration();

  DmaRegistration(const DmaRegistration&) = delete;
  DmaRegistration& operator=(const DmaRegistration&) = delete;

  uint64_t registered_bytes() const { return registered_bytes_.load(std::memory_order_acquire); }
  uint64_t ready_bytes() const { return ready_bytes_.load(std::memory_order_acquire); }
  uint64_t total_bytes() const { return size_; }
  // True once every chunk is ready, or the growth stopped (touch error, destruction).
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Blocks until done(); OK when the whole range is ready and registered (or the build has no
  // backend, in which case registered_bytes() stays 0), else the first error met.
  absl::Status Wait() const;
  // Blocks until ready_bytes() >= bytes or done().
  void WaitReady(uint64_t bytes) const;
  // Waits for the background thread to end (done() is then true). Not concurrently with itself or
  // the destructor. A process that forks should not leave a finished thread unjoined (the
  // sanitizers report it in the child).
  void Join();
  // Seconds from Start to done (0 until done), and to the first chunk ready (0 until then).
  double seconds() const;
  double first_ready_seconds() const;

 private:
  DmaRegistration(void* base, size_t size, std::vector<size_t> chunk_ends, TouchFn touch,
                  ReadyFn ready);
  void Run();
  // Registers chunk [begin, end) unless an earlier registration failed; records the outcome.
  void RegisterChunk(size_t begin, size_t end, absl::Status& reg_error);
  void MarkReady(uint64_t bytes);
  void Finish(absl::Status status, double secs);

  char* const base_;
  const size_t size_;
  const std::vector<size_t> chunk_ends_;
  const TouchFn touch_;
  const ReadyFn ready_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> registered_bytes_{0};
  std::atomic<uint64_t> ready_bytes_{0};
  std::atomic<bool> done_{false};
  std::atomic<bool> stop_{false};
  std::vector<char*> registered_;  // chunk starts; the thread's until it is joined
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  // ready_bytes_ grew or done_ became true
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  double seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double first_ready_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // joined in the destructor
};

}  // namespace kvtier
