// One io_uring over one open file (a T2 slot file), with a completion thread. Internal to the T2
// tier (nvme_tier.cc); the tier owns one ring per directory.
//
// Submission is batched: SubmitBatch queues every SQE of the batch and enters the kernel once. At
// most queue_depth I/Os are in the kernel; the rest wait in a FIFO of ours and are submitted by the
// completion thread as earlier ones finish, so callers never block on a full ring.
//
// Fixed buffers: the ring registers the given ranges (the T1 segment) as fixed buffers, cut into
// pieces of at most 256 MiB. An op whose buffer lies inside a registered piece becomes READ_FIXED /
// WRITE_FIXED (one DMA, no per-I/O pinning); any other buffer a plain READ / WRITE (still O_DIRECT,
// still zero-copy, but the kernel pins its pages per I/O). Pieces are registered as their memory
// becomes ready (DmaRegistration::Watch: T1 grows in the background), so a ring never faults in or
// pins memory that is not ready yet, and opening it costs only the part that is:
//  - sparse (Linux >= 5.19): an empty table of every piece at Create; each piece is filled in
//    (io_uring_register_buffers_update_tag) once its memory is ready, on the thread that reports it
//    (T1's growth thread), before that memory's T1 slots become allocatable. What is ready at
//    Create is registered before Create returns.
//  - whole (a kernel without sparse tables, logged; or FixedBufferOptions::sparse = false): every
//    piece in one call once all of the ranges are ready; every op is plain until then.
// A piece starts at a multiple of FixedBufferOptions::align from its range's start and at each
// growth step, so a slot of that size never straddles two pieces. Registering a piece holds the
// ring's kernel lock while it pins (~30 ms per 1 GiB of 4 KiB pages on the development VM), which
// submissions wait for; 256 MiB pieces keep that wait short and occur only while T1 grows. A
// registration error (RLIMIT_MEMLOCK) fails Create when it is met there; later it is logged and the
// pieces not yet registered stay plain.
//
// Thread-safety: SubmitBatch may be called from any thread, including from a completion. Each op's
// callback and the batch-end hook run on the completion thread, one at a time, in completion order.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "tiers/dma_registration.h"

namespace kvtier {

struct RingOp {
  bool write = false;
  void* buf = nullptr;  // aligned to 4096; `len` bytes
  uint32_t len = 0;     // multiple of 4096
  uint64_t offset = 0;  // in the file; multiple of 4096
  // Runs with the CQE result: bytes transferred, or -errno.
  std::function<void(int)> done;
};

struct FixedBufferOptions {
  std::vector<iovec> ranges;  // caller memory that outlives the ring; may be empty
  uint32_t align = 4096;      // pieces are cut at multiples of this (the slot size); > 0
  bool sparse = true;         // false: the whole way even where the kernel has sparse tables
};

class NvmeRing {
 public:
  // Called on the completion thread after the callbacks of each reaped batch of CQEs. The T2 tier
  // commits its finished writes there (group commit: one fdatasync and one RocksDB batch).
  using BatchEnd = std::function<void()>;

  // `fd` stays owned by the caller and must outlive the ring. `fixed.ranges` are registered as
  // fixed buffers as they become ready (see above). Errors name `what` (the slot file).
  static absl::StatusOr<std::unique_ptr<NvmeRing>> Create(int fd, uint32_t queue_depth,
                                                          const FixedBufferOptions& fixed,
                                                          BatchEnd batch_end,
                                                          const std::string& what);
  // Waits for every submitted op to complete (their callbacks run), then stops the thread.
  ~NvmeRing();
  NvmeRing(const NvmeRing&) = delete;
  NvmeRing& operator=(const NvmeRing&) = delete;

  void SubmitBatch(std::vector<RingOp> ops);
  void Submit(RingOp op);

  // Fixed buffers: bytes of the ranges, bytes registered so far, and ops submitted each way.
  uint64_t fixed_bytes() const { return fixed_bytes_; }
  uint64_t registered_bytes() const { return registered_bytes_.load(std::memory_order_acquire); }
  uint64_t fixed_ops() const { return fixed_ops_.load(std::memory_order_relaxed); }
  uint64_t plain_ops() const { return plain_ops_.load(std::memory_order_relaxed); }
  bool sparse() const { return sparse_; }  // false: the whole way (see above)

 private:
  struct Piece {
    char* base = nullptr;
    size_t len = 0;
    uint32_t range = 0;
    uint64_t end_in_range = 0;  // offset in its range just past the piece
    bool registered = false;    // guarded by mu_
  };
  struct WatchedRange {
    std::unique_ptr<ReadyWatch> watch;
    std::vector<uint32_t> pieces;  // fixed-buffer indexes, in address order
    size_t next = 0;  // pieces[next] is the first not yet registered; only the watch's callback
  };

  NvmeRing(int fd, uint32_t queue_depth, BatchEnd batch_end, std::string what);
  // Plans the pieces of every range (one watch each) and makes the kernel's table. Before the
  // completion thread starts.
  absl::Status SetUpFixedBuffers(const FixedBufferOptions& fixed);
  // Starts the watches; registers what is ready now. Error: a registration failed.
  absl::Status StartWatches();
  // Watch callback of range `r`: registers its pieces that lie within its first `ready` bytes.
  void OnRangeReady(uint32_t r, uint64_t ready);
  void RegisterPieces(const std::vector<uint32_t>& pieces);
  void RegisterAll();
  void MarkRegistered(const std::vector<uint32_t>& pieces);
  void RegistrationFailed(int rc, size_t count, uint64_t bytes);
  // The registered fixed-buffer index holding [buf, buf+len), or -1. Precondition: mu_ held.
  int FixedIndexLocked(const void* buf, uint32_t len) const;
  // Moves waiting ops into SQEs while fewer than queue_depth are in flight; enters the kernel once.
  // Precondition: mu_ held.
  void FillAndSubmitLocked();
  void CompletionLoop();

  const int fd_;
  const uint32_t queue_depth_;
  const BatchEnd batch_end_;
  const std::string what_;
  const std::chrono::steady_clock::time_point start_;
  io_uring ring_{};
  bool ring_up_ = false;  // ring_ initialised (Create may fail before)

  std::vector<Piece> pieces_;         // sorted by base; a piece's index is its fixed-buffer index
  std::vector<WatchedRange> ranges_;  // destroyed first in ~NvmeRing: no callback after
  uint64_t fixed_bytes_ = 0;
  bool sparse_ = false;
  std::atomic<uint64_t> registered_bytes_{0};
  std::atomic<uint64_t> fixed_ops_{0}, plain_ops_{0};
  uint64_t table_bytes_ = 0;  // bytes of pieces_ (fixed_bytes_ unless over the kernel's table)
  std::atomic<bool> registration_failed_{false};
  std::atomic<bool> opened_{false};  // Create returned the ring

  std::mutex mu_;
  std::deque<std::unique_ptr<RingOp>> waiting_;  // guarded by mu_
  uint32_t in_flight_ = 0;                       // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  uint32_t ranges_ready_ = 0;  // ranges whose every piece is ready (whole way); guarded by mu_
  absl::Status registration_error_;  // the first; guarded by mu_
  std::thread thread_;
};

}  // namespace kvtier
