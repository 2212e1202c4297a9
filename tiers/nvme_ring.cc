#include "tiers/nvme_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "common/log.h"

namespace kvtier {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// The kernel's limits: one fixed buffer <= 1 GiB, a table <= 16384 of them
// (IORING_MAX_REG_BUFFERS).
constexpr size_t kMaxFixedBuffer = size_t{1} << 30;
constexpr size_t kMaxFixedBuffers = 16384;
// Pieces start at this size (short kernel-lock holds while one is pinned, see the header) and
// double up to kMaxFixedBuffer for ranges so large that the table would hold more than half the
// kernel's limit.
constexpr size_t kPieceBytes = 256 * kMiB;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NvmeRing>> NvmeRing::Create(int fd, uint32_t queue_depth,
                                                           const FixedBufferOptions& fixed,
                                                           BatchEnd batch_end,
                                                           const std::string& what) {
  std::unique_ptr<NvmeRing> ring(new NvmeRing(fd, queue_depth, std::move(batch_end), what));
  int rc = io_uring_queue_init(queue_depth + 1, &ring->ring_, 0);
  if (rc < 0) {
    return absl::InternalError(fmt::format("t2: io_uring_queue_init({}) for {}: {}",
                                           queue_depth + 1, what, std::strerror(-rc)));
  }
  ring->ring_up_ = true;
  rc = io_uring_register_files(&ring->ring_, &ring->fd_, 1);
  if (rc < 0) {
    return absl::InternalError(
        fmt::format("t2: io_uring_register_files for {}: {}", what, std::strerror(-rc)));
  }
  KVTIER_RETURN_IF_ERROR(ring->SetUpFixedBuffers(fixed));
  ring->thread_ = std::thread([r = ring.get()] { r->CompletionLoop(); });
  KVTIER_RETURN_IF_ERROR(ring->StartWatches());
  ring->opened_.store(true, std::memory_order_release);
  return ring;
}

NvmeRing::NvmeRing(int fd, uint32_t queue_depth, BatchEnd batch_end, std::string what)
    : fd_(fd),
      queue_depth_(queue_depth),
      batch_end_(std::move(batch_end)),
      what_(std::move(what)),
      start_(std::chrono::steady_clock::now()) {}

NvmeRing::~NvmeRing() {
  // Each watch waits for its registration in progress; none starts after.
  for (WatchedRange& w : ranges_) w.watch.reset();
  if (thread_.joinable()) {
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
  }
  if (ring_up_) io_uring_queue_exit(&ring_);
}

absl::Status NvmeRing::SetUpFixedBuffers(const FixedBufferOptions& fixed) {
  const uint64_t total =
      std::accumulate(fixed.ranges.begin(), fixed.ranges.end(), uint64_t{0},
                      [](uint64_t sum, const iovec& v) { return sum + v.iov_len; });
  size_t piece_bytes = kPieceBytes;
  while (piece_bytes < kMaxFixedBuffer && total / piece_bytes > kMaxFixedBuffers / 2)
    piece_bytes *= 2;
  const size_t align = std::max<size_t>(1, fixed.align);
  piece_bytes = std::max(align, piece_bytes / align * align);
  for (uint32_t r = 0; r < fixed.ranges.size(); ++r) {
    auto* base = static_cast<char*>(fixed.ranges[r].iov_base);
    ranges_.push_back(WatchedRange{DmaRegistration::Watch(base, fixed.ranges[r].iov_len), {}, 0});
    uint64_t begin = 0;
    for (uint64_t step : ranges_.back().watch->steps()) {
      for (uint64_t off = begin; off < step; off += piece_bytes) {
        const uint64_t end = std::min<uint64_t>(step, off + piece_bytes);
        pieces_.push_back(Piece{base + off, end - off, r, end, false});
      }
      begin = step;
    }
  }
  fixed_bytes_ = total;
  std::sort(pieces_.begin(), pieces_.end(),
            [](const Piece& a, const Piece& b) { return a.base < b.base; });
  if (pieces_.size() > kMaxFixedBuffers) {
    KVTIER_LOG(kWarn, "t2",
               "{}: {} bytes of t2.registered_ranges make {} fixed buffers, more than the kernel's "
               "{}; the memory past the first {} uses plain O_DIRECT",
               what_, total, pieces_.size(), kMaxFixedBuffers, kMaxFixedBuffers);
    pieces_.resize(kMaxFixedBuffers);
  }
  for (uint32_t i = 0; i < pieces_.size(); ++i) {
    ranges_[pieces_[i].range].pieces.push_back(i);
    table_bytes_ += pieces_[i].len;
  }
  for (const WatchedRange& w : ranges_) ranges_ready_ += w.pieces.empty() ? 1 : 0;
  if (pieces_.empty()) return absl::OkStatus();
  if (!fixed.sparse) return absl::OkStatus();
  const int rc = io_uring_register_buffers_sparse(&ring_, static_cast<unsigned>(pieces_.size()));
  sparse_ = rc == 0;
  if (!sparse_) {
    KVTIER_LOG(kWarn, "t2",
               "{}: io_uring_register_buffers_sparse({}): {} (sparse tables need Linux 5.19): the "
               "fixed buffers ({} bytes) are registered at once when all of them are ready; "
               "transfers use plain O_DIRECT until then",
               what_, pieces_.size(), std::strerror(-rc), table_bytes_);
  }
  return absl::OkStatus();
}

absl::Status NvmeRing::StartWatches() {
  for (uint32_t r = 0; r < ranges_.size(); ++r) {
    ranges_[r].watch->Start([this, r](uint64_t ready) { OnRangeReady(r, ready); });
  }
  if (!pieces_.empty()) {
    const uint64_t now = registered_bytes();
    KVTIER_LOG(kInfo, "t2",
               "{}: fixed buffers over {} bytes in {} pieces ({}): {} bytes registered at open{}",
               what_, table_bytes_, pieces_.size(), sparse_ ? "sparse table" : "one registration",
               now,
               now == table_bytes_ ? ""
                                   : ", the rest as it becomes ready (plain O_DIRECT there until "
                                     "then)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  return registration_error_;
}

void NvmeRing::OnRangeReady(uint32_t r, uint64_t ready) {
  WatchedRange& w = ranges_[r];
  std::vector<uint32_t> now;
  while (w.next < w.pieces.size() && pieces_[w.pieces[w.next]].end_in_range <= ready) {
    now.push_back(w.pieces[w.next++]);
  }
  if (now.empty()) return;
  if (sparse_) {
    RegisterPieces(now);
    return;
  }
  bool all = false;
  if (w.next == w.pieces.size()) {
    std::lock_guard<std::mutex> lock(mu_);
    all = ++ranges_ready_ == ranges_.size();
  }
  if (all) RegisterAll();
}

void NvmeRing::RegisterPieces(const std::vector<uint32_t>& pieces) {
  // One call per piece: each holds the ring's kernel lock only while its own pages are pinned.
  for (uint32_t i : pieces) {
    if (registration_failed_.load(std::memory_order_acquire)) return;
    const iovec v{pieces_[i].base, pieces_[i].len};
    const int rc = io_uring_register_buffers_update_tag(&ring_, i, &v, nullptr, 1);
    if (rc != 1) {
      RegistrationFailed(rc < 0 ? rc : -EIO, 1, v.iov_len);
      return;
    }
    MarkRegistered({i});
  }
}

void NvmeRing::RegisterAll() {
  std::vector<iovec> all;
  std::vector<uint32_t> indexes;
  for (uint32_t i = 0; i < pieces_.size(); ++i) {
    all.push_back(iovec{pieces_[i].base, pieces_[i].len});
    indexes.push_back(i);
  }
  const int rc = io_uring_register_buffers(&ring_, all.data(), static_cast<unsigned>(all.size()));
  if (rc < 0) {
    RegistrationFailed(rc, all.size(), table_bytes_);
    return;
  }
  MarkRegistered(indexes);
}

void NvmeRing::MarkRegistered(const std::vector<uint32_t>& pieces) {
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t i : pieces) {
      pieces_[i].registered = true;
      bytes += pieces_[i].len;
    }
  }
  const uint64_t now = registered_bytes_.fetch_add(bytes, std::memory_order_acq_rel) + bytes;
  if (now == table_bytes_ && opened_.load(std::memory_order_acquire)) {
    KVTIER_LOG(kInfo, "t2", "{}: all {} bytes of fixed buffers registered, {:.3f} s after open",
               what_, table_bytes_, SecondsSince(start_));
  }
}

void NvmeRing::RegistrationFailed(int rc, size_t count, uint64_t bytes) {
  if (registration_failed_.exchange(true)) return;
  absl::Status error = absl::ResourceExhaustedError(fmt::format(
      "t2.registered_ranges: registering {} fixed buffers ({} bytes) for {}: {} (RLIMIT_MEMLOCK?)",
      count, bytes, what_, std::strerror(-rc)));
  KVTIER_LOG(kError, "t2",
             "{}; {} of {} bytes are registered, transfers elsewhere stay plain O_DIRECT (correct, "
             "but the kernel pins their pages per I/O)",
             std::string(error.message()), registered_bytes(), table_bytes_);
  std::lock_guard<std::mutex> lock(mu_);
  registration_error_ = std::move(error);
}

int NvmeRing::FixedIndexLocked(const void* buf, uint32_t len) const {
  const auto* p = static_cast<const char*>(buf);
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), p,
                             [](const char* q, const Piece& v) { return q < v.base; });
  if (it == pieces_.begin()) return -1;
  --it;
  if (!it->registered || p + len > it->base + it->len) return -1;
  return static_cast<int>(it - pieces_.begin());
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
    const int index = FixedIndexLocked(op->buf, op->len);
    if (index >= 0 && op->write) {
      io_uring_prep_write_fixed(sqe, 0, op->buf, op->len, op->offset, index);
    } else if (index >= 0) {
      io_uring_prep_read_fixed(sqe, 0, op->buf, op->len, op->offset, index);
    } else if (op->write) {
      io_uring_prep_write(sqe, 0, op->buf, op->len, op->offset);
    } else {
      io_uring_prep_read(sqe, 0, op->buf, op->len, op->offset);
    }
    (index >= 0 ? fixed_ops_ : plain_ops_).fetch_add(1, std::memory_order_relaxed);
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
