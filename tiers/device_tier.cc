#include "tiers/device_tier.h"

#include <fmt/format.h>

#include <chrono>
#include <string>
#include <utility>

#include "common/log.h"

namespace kvtier {
namespace {

constexpr uint32_t kSlotAlign = 4096;
// The completion thread polls the oldest transfer's event: yields first (a 256 KiB copy takes
// ~10 us), then sleeps briefly so an idle-but-pending queue does not burn a core.
constexpr int kPollYields = 64;
constexpr auto kPollSleep = std::chrono::microseconds(20);

// `status` with "t0 <what>: " in front of its message, same code; OK stays OK.
absl::Status Annotate(const absl::Status& status, const std::string& what) {
  if (status.ok()) return status;
  return absl::Status(status.code(), fmt::format("t0 {}: {}", what, std::string(status.message())));
}

// Makes `device` current on the calling thread for the guard's lifetime, then restores the device
// that was current before (the caller's thread may drive another GPU).
class ScopedDevice {
 public:
  ScopedDevice() = default;
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice() {
    if (previous_ >= 0) (void)gpu::SetDevice(previous_);
  }

  absl::Status Enter(int device) {
    absl::StatusOr<int> current = gpu::CurrentDevice();
    if (!current.ok()) return Annotate(current.status(), "reading the current device");
    if (*current == device) return absl::OkStatus();
    KVTIER_RETURN_IF_ERROR(Annotate(gpu::SetDevice(device), fmt::format("device {}", device)));
    previous_ = *current;
    return absl::OkStatus();
  }

 private:
  int previous_ = -1;  // restored on destruction when >= 0
};

// The pool's size in bytes: whole slots only, from the options and what the device has free.
absl::StatusOr<uint64_t> PoolBytes(const DeviceTierOptions& options, const gpu::DeviceInfo& info) {
  uint64_t want = options.capacity_bytes;
  if (want == 0) {
    want = static_cast<uint64_t>(static_cast<double>(info.free_bytes) * options.free_fraction);
  } else if (want > info.free_bytes) {
    return absl::ResourceExhaustedError(
        fmt::format("t0.capacity_bytes: {} is more than the {} bytes free on device {} ({})", want,
                    info.free_bytes, options.device, info.name));
  }
  uint64_t slots = want / options.slot_bytes;
  if (slots >= kNoSlot) slots = kNoSlot - 1;
  if (slots == 0) {
    return absl::ResourceExhaustedError(fmt::format(
        "t0: a pool of {} bytes on device {} ({}, {} bytes free) holds no slot of t0.slot_bytes "
        "({})",
        want, options.device, info.name, info.free_bytes, options.slot_bytes));
  }
  return slots * options.slot_bytes;
}

}  // namespace

absl::Status DeviceTierOptions::Validate() const {
  if (device < 0) {
    return absl::InvalidArgumentError(fmt::format("t0.device: {} is negative", device));
  }
  if (slot_bytes == 0 || slot_bytes % kSlotAlign != 0) {
    return absl::InvalidArgumentError(
        fmt::format("t0.slot_bytes: {} is not a positive multiple of {}", slot_bytes, kSlotAlign));
  }
  if (capacity_bytes != 0 && capacity_bytes < slot_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("t0.capacity_bytes: {} is less than one slot of t0.slot_bytes ({}); 0 sizes "
                    "the pool from t0.free_fraction",
                    capacity_bytes, slot_bytes));
  }
  // Written so that NaN fails too.
  if (!(free_fraction > 0.0 && free_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        fmt::format("t0.free_fraction: {} is not in (0, 1]", free_fraction));
  }
  return absl::OkStatus();
}

DeviceTier::DeviceTier(int device, std::string pci_bus_id, void* base, size_t size,
                       uint32_t slot_bytes)
    : device_(device),
      pci_bus_id_(std::move(pci_bus_id)),
      base_(base),
      size_(size),
      slot_bytes_(slot_bytes),
      allocator_(static_cast<uint32_t>(size / slot_bytes)) {}

absl::StatusOr<std::unique_ptr<DeviceTier>> DeviceTier::Create(const DeviceTierOptions& options) {
  KVTIER_RETURN_IF_ERROR(options.Validate());
  ScopedDevice on_device;
  KVTIER_RETURN_IF_ERROR(on_device.Enter(options.device));
  absl::StatusOr<gpu::DeviceInfo> info = gpu::GetDeviceInfo(options.device);
  if (!info.ok()) return Annotate(info.status(), fmt::format("device {}", options.device));
  KVTIER_ASSIGN_OR_RETURN(const uint64_t pool, PoolBytes(options, *info));
  absl::StatusOr<void*> base = gpu::DeviceAlloc(pool);
  if (!base.ok()) {
    return Annotate(base.status(), fmt::format("allocating the pool of {} bytes on device {} ({})",
                                               pool, options.device, info->name));
  }
  // From here the tier owns the pool: every early return below frees it.
  std::unique_ptr<DeviceTier> tier(new DeviceTier(options.device, info->pci_bus_id, *base,
                                                  static_cast<size_t>(pool), options.slot_bytes));
  KVTIER_RETURN_IF_ERROR(tier->Start());
  KVTIER_LOG(kInfo, "t0",
             "pool of {} bytes ({} slots of {} bytes) on device {} ({}, {}; {} of {} bytes were "
             "free), IPC handle exported",
             pool, tier->capacity_slots(), tier->slot_bytes_, options.device, info->name,
             info->pci_bus_id, info->free_bytes, info->total_bytes);
  return tier;
}

absl::Status DeviceTier::Start() {
  absl::StatusOr<gpu::IpcHandle> handle = gpu::ExportIpc(base_);
  if (!handle.ok()) return Annotate(handle.status(), "exporting the pool's IPC handle");
  ipc_handle_ = *handle;
  absl::StatusOr<gpu::Stream> to_device = gpu::Stream::Create();
  if (!to_device.ok()) return Annotate(to_device.status(), "creating the host->device stream");
  to_device_ = std::move(*to_device);
  absl::StatusOr<gpu::Stream> to_host = gpu::Stream::Create();
  if (!to_host.ok()) return Annotate(to_host.status(), "creating the device->host stream");
  to_host_ = std::move(*to_host);
  completer_ = std::thread([this] { CompletionLoop(); });
  return absl::OkStatus();
}

DeviceTier::~DeviceTier() {
  if (completer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      stopping_ = true;
    }
    queue_cv_.notify_all();
    completer_.join();  // runs every queued `done` first
  }
  ScopedDevice on_device;
  const absl::Status entered = on_device.Enter(device_);
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    free_events_.clear();
  }
  to_device_ = gpu::Stream();
  to_host_ = gpu::Stream();
  const absl::Status freed = entered.ok() ? gpu::DeviceFree(base_) : entered;
  if (!freed.ok()) {
    KVTIER_LOG(kError, "t0", "freeing the pool of {} bytes: {}", size_,
               std::string(freed.message()));
  }
}

absl::StatusOr<SlotId> DeviceTier::Allocate() { return allocator_.Allocate(); }

void DeviceTier::Free(SlotId slot) {
  const absl::Status status = allocator_.Free(slot);
  if (!status.ok()) KVTIER_LOG(kError, "t0", "refused: {}", std::string(status.message()));
}

void DeviceTier::Write(SlotId slot, const BlockRecord& record, const void* src, IoDone done) {
  if (!ValidSlot(slot) || record.payload_bytes > slot_bytes_) {
    Pending p;
    p.direction = Direction::kHostToDevice;
    p.status = absl::InvalidArgumentError(
        fmt::format("t0 write: slot {} of {}, payload {} bytes of at most {}", slot,
                    capacity_slots(), record.payload_bytes, slot_bytes_));
    p.done = std::move(done);
    Enqueue(std::move(p));
    return;
  }
  Submit(Direction::kHostToDevice, SlotData(slot), src, record.payload_bytes, std::move(done));
}

void DeviceTier::Read(SlotId slot, void* dst, IoDone done) {
  if (!ValidSlot(slot)) {
    Pending p;
    p.direction = Direction::kDeviceToHost;
    p.status = absl::InvalidArgumentError(
        fmt::format("t0 read: slot {} out of range ({} slots)", slot, capacity_slots()));
    p.done = std::move(done);
    Enqueue(std::move(p));
    return;
  }
  Submit(Direction::kDeviceToHost, dst, SlotData(slot), slot_bytes_, std::move(done));
}

void DeviceTier::Submit(Direction direction, void* dst, const void* src, size_t bytes,
                        IoDone done) {
  Pending p;
  p.direction = direction;
  p.bytes = bytes;
  p.done = std::move(done);
  ScopedDevice on_device;
  p.status = on_device.Enter(device_);
  if (p.status.ok()) {
    const bool to_device = direction == Direction::kHostToDevice;
    std::lock_guard<std::mutex> lock(to_device ? to_device_mu_ : to_host_mu_);
    EnqueueCopy(to_device ? to_device_ : to_host_, dst, src, bytes, &p);
  }
  Enqueue(std::move(p));
}

void DeviceTier::EnqueueCopy(const gpu::Stream& stream, void* dst, const void* src, size_t bytes,
                             Pending* p) {
  absl::StatusOr<gpu::Event> event = TakeEvent();
  if (!event.ok()) {
    p->status = Annotate(event.status(), "creating a completion event");
    return;
  }
  absl::Status status = gpu::CopyAsync(dst, src, bytes, stream.handle());
  if (status.ok()) status = event->Record(stream.handle());
  if (!status.ok()) {
    // The copy may be queued even though a call failed: `done` waits for the whole stream.
    p->status = Annotate(status, fmt::format("enqueueing a copy of {} bytes", bytes));
    p->sync_stream = &stream;
    ReturnEvent(std::move(*event));
    return;
  }
  p->event = std::move(*event);
}

void DeviceTier::Enqueue(Pending p) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.push_back(std::move(p));
  }
  queue_cv_.notify_one();
}

void DeviceTier::CompletionLoop() {
  const absl::Status on_device = gpu::SetDevice(device_);
  if (!on_device.ok()) {
    KVTIER_LOG(kWarn, "t0", "completion thread: {}", std::string(on_device.message()));
  }
  for (;;) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything queued has completed
      p = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::Status status = WaitFor(p);
    const bool write = p.direction == Direction::kHostToDevice;
    if (status.ok() && write) {
      io_.Write(p.bytes);
    } else if (status.ok()) {
      io_.Read(p.bytes);
    } else if (write) {
      io_.WriteErrors();
    } else {
      io_.ReadError();
    }
    if (p.done) p.done(std::move(status));
  }
}

absl::Status DeviceTier::WaitFor(Pending& p) {
  if (!p.event) {
    if (p.sync_stream != nullptr) {
      const absl::Status synced = p.sync_stream->Synchronize();
      if (!synced.ok()) {
        KVTIER_LOG(kError, "t0", "waiting for a failed copy's stream: {}",
                   std::string(synced.message()));
      }
    }
    return p.status;
  }
  for (int polls = 0;; ++polls) {
    absl::StatusOr<bool> done = p.event->Done();
    if (!done.ok()) {
      // An asynchronous copy failed (the error is sticky for the context): the event is not
      // reused.
      return Annotate(done.status(), fmt::format("copy of {} bytes", p.bytes));
    }
    if (*done) break;
    if (polls < kPollYields) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kPollSleep);
    }
  }
  ReturnEvent(std::move(*p.event));
  p.event.reset();
  return p.status;
}

absl::StatusOr<gpu::Event> DeviceTier::TakeEvent() {
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    if (!free_events_.empty()) {
      gpu::Event event = std::move(free_events_.back());
      free_events_.pop_back();
      return event;
    }
  }
  return gpu::Event::Create(/*timing=*/false);  // on the current device: the tier's (Submit)
}

void DeviceTier::ReturnEvent(gpu::Event event) {
  std::lock_guard<std::mutex> lock(events_mu_);
  free_events_.push_back(std::move(event));
}

TierStats DeviceTier::Stats() const {
  TierStats s;
  s.slot_bytes = slot_bytes_;
  s.capacity_slots = capacity_slots();
  s.used_slots = allocator_.used();
  io_.Fill(s);
  s.rejected_allocations = allocator_.exhausted();
  return s;
}

}  // namespace kvtier
