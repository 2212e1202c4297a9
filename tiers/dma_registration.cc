#include "tiers/dma_registration.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string_view>

#include "common/log.h"
#include "kernels/gpu_runtime.h"

namespace kvtier {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Portable and mapped (kernels/gpu_runtime.h): usable from every context in the process, and GPU
// kernels may read it in place (DESIGN.md: scattered small blocks at line rate).
absl::Status RegisterChunk(void* p, size_t n) { return gpu::HostRegister(p, n); }
void UnregisterChunk(void* p) { (void)gpu::HostUnregister(p); }

}  // namespace

bool DmaRegistration::BackendAvailable() { return std::string_view(gpu::BackendName()) != "none"; }

const char* DmaRegistration::BackendName() { return gpu::BackendName(); }

DmaRegistration::DmaRegistration(void* base, size_t size, size_t chunk_bytes)
    : base_(static_cast<char*>(base)), size_(size), chunk_bytes_(chunk_bytes) {}

std::unique_ptr<DmaRegistration> DmaRegistration::Start(void* base, size_t size,
                                                        size_t chunk_bytes) {
  std::unique_ptr<DmaRegistration> reg(new DmaRegistration(base, size, chunk_bytes));
  if (!BackendAvailable()) {
    KVTIER_LOG(kInfo, "t1", "DMA registration skipped: CPU-only build (no GPU backend)");
    reg->Finish(absl::OkStatus());
    return reg;
  }
  reg->thread_ = std::thread([r = reg.get()] { r->Run(); });
  return reg;
}

void DmaRegistration::Run() {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status;
  size_t offset = 0;
  while (offset < size_ && !stop_.load(std::memory_order_acquire)) {
    const size_t n = std::min(chunk_bytes_, size_ - offset);
    status = RegisterChunk(base_ + offset, n);
    if (!status.ok()) break;
    offset += n;
    registered_bytes_.store(offset, std::memory_order_release);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) {
    KVTIER_LOG(kError, "t1", "DMA registration stopped at {} of {} bytes: {}", offset, size_,
               status.ToString());
  } else if (offset == size_) {
    KVTIER_LOG(kInfo, "t1",
               "DMA registration ({}) of {} bytes in {} chunks done in {:.3f} s ({:.3f} s/GiB)",
               BackendName(), size_, (size_ + chunk_bytes_ - 1) / chunk_bytes_, secs,
               size_ > 0 ? secs / (size_ / kGiB) : 0.0);
  } else {
    status = absl::CancelledError(
        fmt::format("DMA registration cancelled at {} of {} bytes", offset, size_));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    seconds_ = secs;
  }
  Finish(status);
}

void DmaRegistration::Finish(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(status);
    done_.store(true, std::memory_order_release);
  }
  done_cv_.notify_all();
}

absl::Status DmaRegistration::Wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
  return result_;
}

double DmaRegistration::seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seconds_;
}

DmaRegistration::~DmaRegistration() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  // Chunks were registered at chunk_bytes_ strides from base_; unregister each by its start.
  const uint64_t registered = registered_bytes();
  for (uint64_t off = 0; off < registered; off += chunk_bytes_) UnregisterChunk(base_ + off);
}

}  // namespace kvtier
