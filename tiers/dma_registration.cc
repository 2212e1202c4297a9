#include "tiers/dma_registration.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <string_view>
#include <utility>

#include "common/log.h"
#include "kernels/gpu_runtime.h"

namespace kvtier {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// What a DmaRegistration shares with the watches of its range: the range, its chunks, how much is
// ready and whom to tell. Lives as long as the registration or one of its watches.
struct DmaRegistration::Growth {
  Growth(char* b, size_t s, std::vector<size_t> ends)
      : base(b), size(s), chunk_ends(std::move(ends)) {}
  char* const base;
  const size_t size;
  const std::vector<size_t> chunk_ends;
  std::mutex mu;
  uint64_t ready ABSL_GUARDED_BY(mu) = 0;
  std::vector<ReadyWatch*> watches ABSL_GUARDED_BY(mu);
};

namespace {

// The growths of the live DmaRegistrations, for Watch to find by address.
struct GrowthList {
  std::mutex mu;
  std::vector<std::shared_ptr<DmaRegistration::Growth>> growths ABSL_GUARDED_BY(mu);
};

GrowthList& Growths() {
  static GrowthList* const list = new GrowthList;  // never destroyed: usable at exit
  return *list;
}

}  // namespace

bool DmaRegistration::BackendAvailable() { return std::string_view(gpu::BackendName()) != "none"; }

const char* DmaRegistration::BackendName() { return gpu::BackendName(); }

DmaRegistration::DmaRegistration(void* base, size_t size, std::vector<size_t> chunk_ends,
                                 TouchFn touch, ReadyFn ready)
    : base_(static_cast<char*>(base)),
      size_(size),
      chunk_ends_(std::move(chunk_ends)),
      touch_(std::move(touch)),
      ready_(std::move(ready)),
      start_(std::chrono::steady_clock::now()),
      growth_(std::make_shared<Growth>(base_, size_, chunk_ends_)) {}

std::unique_ptr<DmaRegistration> DmaRegistration::Start(void* base, size_t size,
                                                        std::vector<size_t> chunk_ends,
                                                        TouchFn touch, ReadyFn ready) {
  std::unique_ptr<DmaRegistration> reg(
      new DmaRegistration(base, size, std::move(chunk_ends), std::move(touch), std::move(ready)));
  if (!BackendAvailable()) {
    KVTIER_LOG(kDebug, "t1", "DMA registration skipped: CPU-only build (no GPU backend)");
  }
  {
    GrowthList& list = Growths();
    std::lock_guard<std::mutex> lock(list.mu);
    list.growths.push_back(reg->growth_);
  }
  reg->thread_ = std::thread([r = reg.get()] { r->Run(); });
  return reg;
}

void DmaRegistration::Run() {
  absl::Status touch_error, reg_error;
  const size_t n = chunk_ends_.size();
  auto touch = [this](size_t i) {
    const size_t begin = i == 0 ? 0 : chunk_ends_[i - 1];
    return touch_(base_ + begin, chunk_ends_[i] - begin);
  };
  if (n > 0) touch_error = touch(0);
  size_t i = 0;
  for (; i < n && touch_error.ok() && !stop_.load(std::memory_order_acquire); ++i) {
    // The next chunk faults in (on the touch hook's threads) while this one is registered.
    std::future<absl::Status> next;
    if (i + 1 < n) next = std::async(std::launch::async, touch, i + 1);
    // The first chunk is usable as soon as it is faulted in: its registration also creates the
    // GPU context (~0.2 s on the H100), which the process need not wait for to serve. The driver
    // stages a DMA from it meanwhile. Every later chunk is usable once registered.
    if (i == 0) MarkReady(chunk_ends_[0]);
    RegisterChunk(i == 0 ? 0 : chunk_ends_[i - 1], chunk_ends_[i], reg_error);
    if (i != 0) MarkReady(chunk_ends_[i]);
    if (next.valid()) touch_error = next.get();
  }
  const double secs = SecondsSince(start_);
  const uint64_t ready = ready_bytes();
  if (!touch_error.ok()) {
    KVTIER_LOG(kError, "t1", "faulting in stopped at {} of {} bytes (those stay usable): {}", ready,
               size_, touch_error.ToString());
  } else if (ready == size_) {
    KVTIER_LOG(kInfo, "t1",
               "all {} bytes usable in {:.3f} s ({} chunks faulted in{}; {:.3f} s/GiB)", size_,
               secs, n,
               registered_bytes() == size_ ? fmt::format(" and registered ({})", BackendName())
                                           : std::string(),
               size_ > 0 ? secs / (size_ / kGiB) : 0.0);
  }
  absl::Status result = !touch_error.ok() ? touch_error : reg_error;
  if (result.ok() && ready < size_) {
    result = absl::CancelledError(
        fmt::format("T1 growth cancelled at {} of {} bytes (shutdown)", ready, size_));
  }
  Finish(std::move(result), secs);
}

void DmaRegistration::RegisterChunk(size_t begin, size_t end, absl::Status& reg_error) {
  if (!BackendAvailable() || !reg_error.ok()) return;
  // Portable and mapped (kernels/gpu_runtime.h): usable from every context in the process, and GPU
  // kernels may read it in place (DESIGN.md: scattered small blocks at line rate).
  reg_error = gpu::HostRegister(base_ + begin, end - begin);
  if (!reg_error.ok()) {
    KVTIER_LOG(kError, "t1",
               "DMA registration stopped at {} of {} bytes: {}; the rest is used unregistered",
               begin, size_, reg_error.ToString());
    return;
  }
  registered_.push_back(base_ + begin);
  registered_bytes_.store(end, std::memory_order_release);
}

void DmaRegistration::MarkReady(uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(growth_->mu);
    growth_->ready = bytes;
    for (ReadyWatch* watch : growth_->watches) watch->Advance(bytes);
  }
  if (ready_) ready_(bytes);  // before ready_bytes_: a waiter then finds the slots allocatable
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_bytes_.store(bytes, std::memory_order_release);
    if (first_ready_seconds_ == 0) first_ready_seconds_ = SecondsSince(start_);
  }
  cv_.notify_all();
}

void DmaRegistration::Finish(absl::Status status, double secs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(status);
    seconds_ = secs;
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

absl::Status DmaRegistration::Wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
  return result_;
}

void DmaRegistration::WaitReady(uint64_t bytes) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ready_bytes() >= bytes || done_.load(std::memory_order_acquire); });
}

double DmaRegistration::seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seconds_;
}

double DmaRegistration::first_ready_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_ready_seconds_;
}

void DmaRegistration::Join() {
  if (thread_.joinable()) thread_.join();
}

DmaRegistration::~DmaRegistration() {
  stop_.store(true, std::memory_order_release);
  Join();
  {
    GrowthList& list = Growths();
    std::lock_guard<std::mutex> lock(list.mu);
    std::erase(list.growths, growth_);
  }
  for (char* chunk : registered_) (void)gpu::HostUnregister(chunk);
}

std::unique_ptr<ReadyWatch> DmaRegistration::Watch(const void* base, size_t bytes) {
  const char* p = static_cast<const char*>(base);
  GrowthList& list = Growths();
  std::lock_guard<std::mutex> lock(list.mu);
  for (const std::shared_ptr<Growth>& g : list.growths) {
    if (p < g->base || p + bytes > g->base + g->size) continue;
    const uint64_t offset = static_cast<uint64_t>(p - g->base);
    std::vector<uint64_t> steps;
    for (size_t end : g->chunk_ends) {
      if (end > offset && end < offset + bytes) steps.push_back(end - offset);
    }
    steps.push_back(bytes);
    return std::unique_ptr<ReadyWatch>(new ReadyWatch(g, offset, bytes, std::move(steps)));
  }
  return std::unique_ptr<ReadyWatch>(new ReadyWatch(nullptr, 0, bytes, {bytes}));
}

ReadyWatch::ReadyWatch(std::shared_ptr<DmaRegistration::Growth> growth, uint64_t offset,
                       uint64_t bytes, std::vector<uint64_t> steps)
    : growth_(std::move(growth)), offset_(offset), bytes_(bytes), steps_(std::move(steps)) {}

ReadyWatch::~ReadyWatch() {
  if (!growth_) return;
  std::lock_guard<std::mutex> lock(growth_->mu);  // waits for a call in progress
  std::erase(growth_->watches, this);
}

void ReadyWatch::Start(ReadyFn ready) {
  if (!growth_) {
    reported_ = bytes_;
    ready(bytes_);
    return;
  }
  std::lock_guard<std::mutex> lock(growth_->mu);
  ready_ = std::move(ready);
  growth_->watches.push_back(this);
  const uint64_t now = growth_->ready;
  reported_ = now <= offset_ ? 0 : std::min(bytes_, now - offset_);
  ready_(reported_);
}

void ReadyWatch::Advance(uint64_t growth_ready) {
  const uint64_t end = growth_ready <= offset_ ? 0 : std::min(bytes_, growth_ready - offset_);
  if (end <= reported_) return;
  reported_ = end;
  ready_(end);
}

}  // namespace kvtier
