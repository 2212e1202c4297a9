#include "tiers/nvme_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<NvmeRing>> NvmeRing::Create(int fd, uint32_t queue_depth,
                                                           const std::vector<iovec>& buffers,
                                                           BatchEnd batch_end,
                                                           const std::string& what) {
  std::unique_ptr<NvmeRing> ring(new NvmeRing(fd, queue_depth, std::move(batch_end)));
  int rc = io_uring_queue_init(queue_depth + 1, &ring->ring_, 0);
  if (rc < 0) {
    return absl::InternalError(fmt::format("t2: io_uring_queue_init({}) for {}: {}",
                                           queue_depth + 1, what, std::strerror(-rc)));
  }
  rc = io_uring_register_files(&ring->ring_, &ring->fd_, 1);
  if (rc < 0) {
    io_uring_queue_exit(&ring->ring_);
    return absl::InternalError(
        fmt::format("t2: io_uring_register_files for {}: {}", what, std::strerror(-rc)));
  }
  ring->fixed_ = buffers;
  std::sort(ring->fixed_.begin(), ring->fixed_.end(),
            [](const iovec& a, const iovec& b) { return a.iov_base < b.iov_base; });
  if (!ring->fixed_.empty()) {
    rc = io_uring_register_buffers(&ring->ring_, ring->fixed_.data(), ring->fixed_.size());
    if (rc < 0) {
      io_uring_queue_exit(&ring->ring_);
      return absl::ResourceExhaustedError(fmt::format(
          "t2.registered_ranges: registering {} fixed buffers for {}: {} (RLIMIT_MEMLOCK?)",
          ring->fixed_.size(), what, std::strerror(-rc)));
    }
  }
  ring->thread_ = std::thread([r = ring.get()] { r->CompletionLoop(); });
  return ring;
}

NvmeRing::NvmeRing(int fd, uint32_t queue_depth, BatchEnd batch_end)
    : fd_(fd), queue_depth_(queue_depth), batch_end_(std::move(batch_end)) {}

NvmeRing::~NvmeRing() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    // A NOP with no op wakes the completion thread so it sees stopping_ even when idle.
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe != nullptr) {
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data(sqe, nullptr);
      io_uring_submit(&ring_);
    }
  }
  thread_.join();
  io_uring_queue_exit(&ring_);
}

int NvmeRing::FixedIndex(const void* buf, uint32_t len) const {
  const auto* p = static_cast<const char*>(buf);
  auto it = std::upper_bound(fixed_.begin(), fixed_.end(), p, [](const char* q, const iovec& v) {
    return q < static_cast<const char*>(v.iov_base);
  });
  if (it == fixed_.begin()) return -1;
  --it;
  const auto* base = static_cast<const char*>(it->iov_base);
  if (p + len > base + it->iov_len) return -1;
  return static_cast<int>(it - fixed_.begin());
}

void NvmeRing::Submit(RingOp op) {
  std::vector<RingOp> ops;
  ops.push_back(std::move(op));
  SubmitBatch(std::move(ops));
}

void NvmeRing::SubmitBatch(std::vector<RingOp> ops) {
  std::lock_guard<std::mutex> lock(mu_);
  for (RingOp& op : ops) waiting_.push_back(std::make_unique<RingOp>(std::move(op)));
  FillAndSubmitLocked();
}

void NvmeRing::FillAndSubmitLocked() {
  bool queued = false;
  while (!waiting_.empty() && in_flight_ < queue_depth_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) break;  // SQ full until the next submit; the loop below retries
    RingOp* op = waiting_.front().release();
    waiting_.pop_front();
    const int index = FixedIndex(op->buf, op->len);
    if (index >= 0 && op->write) {
      io_uring_prep_write_fixed(sqe, 0, op->buf, op->len, op->offset, index);
    } else if (index >= 0) {
      io_uring_prep_read_fixed(sqe, 0, op->buf, op->len, op->offset, index);
    } else if (op->write) {
      io_uring_prep_write(sqe, 0, op->buf, op->len, op->offset);
    } else {
      io_uring_prep_read(sqe, 0, op->buf, op->len, op->offset);
    }
    sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data(sqe, op);
    ++in_flight_;
    queued = true;
  }
  if (queued) {
    const int rc = io_uring_submit(&ring_);
    if (rc < 0) KVTIER_LOG(kError, "t2", "io_uring_submit: {}", std::strerror(-rc));
  }
}

void NvmeRing::CompletionLoop() {
  std::vector<std::pair<RingOp*, int>> batch;
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc < 0 && rc != -EINTR) {
      KVTIER_LOG(kError, "t2", "io_uring_wait_cqe: {}", std::strerror(-rc));
      continue;
    }
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      auto* op = static_cast<RingOp*>(io_uring_cqe_get_data(cqe));
      if (op != nullptr) batch.emplace_back(op, cqe->res);
      ++seen;
    }
    io_uring_cq_advance(&ring_, seen);
    // Free ring room first, so callbacks that submit more find it.
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ -= static_cast<uint32_t>(batch.size());
      FillAndSubmitLocked();
    }
    for (auto& [op, res] : batch) {
      op->done(res);
      delete op;
    }
    if (!batch.empty() && batch_end_) batch_end_();
    batch.clear();
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && in_flight_ == 0 && waiting_.empty()) return;
  }
}

}  // namespace kvtier
