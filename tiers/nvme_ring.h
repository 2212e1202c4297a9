// One io_uring over one open file (a T2 slot file), with a completion thread. Internal to the T2
// tier (nvme_tier.cc); the tier owns one ring per directory.
//
// Submission is batched: SubmitBatch queues every SQE of the batch and enters the kernel once. At
// most queue_depth I/Os are in the kernel; the rest wait in a FIFO of ours and are submitted by the
// completion thread as earlier ones finish, so callers never block on a full ring.
//
// Fixed buffers: the ring registers the given iovecs (the T1 segment, <= 1 GiB each). An op whose
// buffer lies inside one becomes READ_FIXED / WRITE_FIXED; any other buffer a plain READ / WRITE
// (still O_DIRECT, still zero-copy, but the kernel pins its pages per I/O).
//
// Thread-safety: SubmitBatch may be called from any thread, including from a completion. Each op's
// callback and the batch-end hook run on the completion thread, one at a time, in completion order.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"

namespace kvtier {

struct RingOp {
  bool write = false;
  void* buf = nullptr;  // aligned to 4096; `len` bytes
  uint32_t len = 0;     // multiple of 4096
  uint64_t offset = 0;  // in the file; multiple of 4096
  // Runs with the CQE result: bytes transferred, or -errno.
  std::function<void(int)> done;
};

class NvmeRing {
 public:
  // Called on the completion thread after the callbacks of each reaped batch of CQEs. The T2 tier
  // commits its finished writes there (group commit: one fdatasync and one RocksDB batch).
  using BatchEnd = std::function<void()>;

  // `fd` stays owned by the caller and must outlive the ring. `buffers` are registered as fixed
  // buffers (may be empty). Errors name `what` (the slot file).
  static absl::StatusOr<std::unique_ptr<NvmeRing>> Create(int fd, uint32_t queue_depth,
                                                          const std::vector<iovec>& buffers,
                                                          BatchEnd batch_end,
                                                          const std::string& what);
  // Waits for every submitted op to complete (their callbacks run), then stops the thread.
  ~NvmeRing();
  NvmeRing(const NvmeRing&) = delete;
  NvmeRing& operator=(const NvmeRing&) = delete;

  void SubmitBatch(std::vector<RingOp> ops);
  void Submit(RingOp op);

 private:
  NvmeRing(int fd, uint32_t queue_depth, BatchEnd batch_end);
  // The fixed-buffer index holding [buf, buf+len), or -1.
  int FixedIndex(const void* buf, uint32_t len) const;
  // Moves waiting ops into SQEs while fewer than queue_depth are in flight; enters the kernel once.
  // Precondition: mu_ held.
  void FillAndSubmitLocked();
  void CompletionLoop();

  const int fd_;
  const uint32_t queue_depth_;
  const BatchEnd batch_end_;
  io_uring ring_{};
  std::vector<iovec> fixed_;  // registered buffers, sorted by base

  std::mutex mu_;
  std::deque<std::unique_ptr<RingOp>> waiting_;  // guarded by mu_
  uint32_t in_flight_ = 0;                       // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  std::thread thread_;
};

}  // namespace kvtier
