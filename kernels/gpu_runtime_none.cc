// CPU-variant implementation of kernels/gpu_runtime.h: this build has no GPU backend, so every
// call that needs a device answers FailedPrecondition with the same sentence, and handles stay
// empty. Callers treat that as "no GPU here" (tests skip, the daemon runs without T0).
#include "kernels/gpu_runtime.h"

namespace kvtier::gpu {
namespace {

absl::Status NoBackend() {
  return absl::FailedPreconditionError(
      "kvtier was built without a GPU backend (CPU-only variant); configure with --preset cuda "
      "or --preset hip");
}

}  // namespace

const char* BackendName() { return "none"; }
std::string UnavailableReason() {
  return "kvtier was built without a GPU backend (CPU-only variant)";
}

absl::StatusOr<int> DeviceCount() { return NoBackend(); }
absl::Status SetDevice(int) { return NoBackend(); }
absl::StatusOr<int> CurrentDevice() { return NoBackend(); }
absl::StatusOr<DeviceInfo> GetDeviceInfo(int) { return NoBackend(); }
absl::StatusOr<int> DeviceByPciBusId(const std::string&) { return NoBackend(); }
absl::StatusOr<void*> DeviceAlloc(size_t) { return NoBackend(); }
absl::Status DeviceFree(void* p) { return p ? NoBackend() : absl::OkStatus(); }
absl::StatusOr<void*> PinnedAlloc(size_t) { return NoBackend(); }
absl::Status PinnedFree(void* p) { return p ? NoBackend() : absl::OkStatus(); }
absl::Status HostRegister(void*, size_t) { return NoBackend(); }
absl::Status HostUnregister(void*) { return NoBackend(); }
absl::StatusOr<void*> DevicePointerOf(void*) { return NoBackend(); }
absl::StatusOr<IpcHandle> ExportIpc(void*) { return NoBackend(); }
absl::StatusOr<void*> OpenIpc(const IpcHandle&) { return NoBackend(); }
absl::Status CloseIpc(void*) { return NoBackend(); }

absl::StatusOr<Stream> Stream::Create() { return NoBackend(); }
Stream::Stream(Stream&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
Stream& Stream::operator=(Stream&& other) noexcept {
  handle_ = other.handle_;
  other.handle_ = nullptr;
  return *this;
}
Stream::~Stream() = default;
absl::Status Stream::Synchronize() const { return NoBackend(); }

absl::StatusOr<Event> Event::Create(bool) { return NoBackend(); }
Event::Event(Event&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
Event& Event::operator=(Event&& other) noexcept {
  handle_ = other.handle_;
  other.handle_ = nullptr;
  return *this;
}
Event::~Event() = default;
absl::Status Event::Record(StreamHandle) const { return NoBackend(); }
absl::StatusOr<bool> Event::Done() const { return NoBackend(); }
absl::Status Event::Synchronize() const { return NoBackend(); }
absl::StatusOr<float> Event::ElapsedMs(const Event&, const Event&) { return NoBackend(); }

absl::Status StreamWaitEvent(StreamHandle, const Event&) { return NoBackend(); }
absl::Status CopyAsync(void*, const void*, size_t, StreamHandle) { return NoBackend(); }
absl::Status MemsetAsync(void*, int, size_t, StreamHandle) { return NoBackend(); }
absl::Status CopyBatchAsync(std::span<const CopyOp>, StreamHandle) { return NoBackend(); }
absl::Status DeviceSynchronize() { return NoBackend(); }

}  // namespace kvtier::gpu
