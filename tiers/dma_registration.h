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
// Other users of the memory follow the growth with a ReadyWatch (DmaRegistration::Watch): T2's
// io_uring registers its fixed buffers over T1 chunk by chunk instead of pinning (and so faulting
// in) all of T1 when it opens. Watches are told of a chunk before the ready hook makes it usable.
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

class ReadyWatch;

class DmaRegistration {
 public:
  // Faults [begin, begin + bytes) in; non-OK stops the growth (ResourceExhausted: no memory).
  using TouchFn = std::function<absl::Status(char* begin, size_t bytes)>;
  // [base, base + ready_bytes) is usable now; called once per chunk with increasing values.
  using ReadyFn = std::function<void(uint64_t ready_bytes)>;

  // Follows the readiness of [base, base + bytes) for a user that must wait for it (T2's io_uring
  // fixed buffers over T1), found by address among the live DmaRegistrations of this process, so
  // that user needs nothing but the range. A range inside one follows its growth; any other memory
  // (plain memory, or a range only partly inside one) is ready at once. See ReadyWatch.
  static std::unique_ptr<ReadyWatch> Watch(const void* base, size_t bytes);
  struct Growth;  // what a registration shares with its watches; internal (dma_registration.cc)

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
  std::shared_ptr<Growth> growth_;  // listed process-wide from Start to the destructor
  std::thread thread_;              // joined in the destructor
};

// One user's view of a memory range's readiness (from DmaRegistration::Watch). steps() says
// up front where readiness can advance; Start then reports it as it does.
//
// Thread-safety: Start is called once. The ready callback runs first on the thread calling Start,
// then on the growth thread, never two at a time for one watch. The destructor waits for a call in
// progress and stops further ones; a watch may outlive the DmaRegistration it follows (it is then
// told nothing more).
class ReadyWatch {
 public:
  using ReadyFn = std::function<void(uint64_t ready_bytes)>;

  ~ReadyWatch();
  ReadyWatch(const ReadyWatch&) = delete;
  ReadyWatch& operator=(const ReadyWatch&) = delete;

  // Offsets in the range at which its readiness can advance (the growth's chunk ends inside it),
  // increasing, the last equal to the range's size. {size} for memory ready at once.
  const std::vector<uint64_t>& steps() const { return steps_; }
  // Calls ready(b), b being the bytes of the range ready from its start (always one of steps(), or
  // 0), at once with what is ready now, then each time that grows, until the size is reached. A
  // chunk is reported before the growth's own ready hook makes it usable (T1's slots), so work done
  // here delays that chunk's slots, not the growth of the next chunk (which overlaps it).
  void Start(ReadyFn ready);

 private:
  friend class DmaRegistration;
  ReadyWatch(std::shared_ptr<DmaRegistration::Growth> growth, uint64_t offset, uint64_t bytes,
             std::vector<uint64_t> steps);
  // Tells the callback of growth to `growth_ready` bytes (from the growth's start) if this range
  // gained any. Precondition: the growth's mutex held.
  void Advance(uint64_t growth_ready);

  const std::shared_ptr<DmaRegistration::Growth> growth_;  // null: ready at once
  const uint64_t offset_;                                  // of the range in the growth
  const uint64_t bytes_;
  const std::vector<uint64_t> steps_;
  ReadyFn ready_;          // set by Start; called under the growth's mutex
  uint64_t reported_ = 0;  // under the growth's mutex
};

}  // namespace kvtier
