// kvtier's GPU runtime wrappers: the host calls every other part of kvtier makes to a GPU (devices,
// memory, pinning, IPC, streams, events, copies), with no vendor type in sight and errors as
// absl::Status — a GPU error is a value the caller handles, never an abort (DESIGN.md "GPU code").
//
// Three variants, one header (cmake/KvtierGpu.cmake): CUDA and HIP builds implement it in
// gpu_runtime.cc over kernels/gpu_vendor.h; the CPU-only build in gpu_runtime_none.cc, where every
// call that needs a device answers FailedPrecondition saying the build has no GPU backend.
//
// Devices: calls act on the calling thread's current device (SetDevice), as the vendor runtimes
// do. Streams and events are the vendor's own objects behind opaque handles, so a stream that an
// engine owns (a torch stream's cuda_stream value) can be passed in as a StreamHandle.
//
// Thread-safety: every function may be called from any thread; a Stream or Event object is used by
// one thread at a time (the underlying runtime objects themselves are thread-safe).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace kvtier::gpu {

// cudaStream_t / hipStream_t and cudaEvent_t / hipEvent_t are pointers in both runtimes.
// nullptr as a StreamHandle is the legacy default stream.
using StreamHandle = void*;
using EventHandle = void*;

// "cuda", "hip" or "none" (CPU-only build).
const char* BackendName();
// Empty when at least one device is usable; otherwise why not, for a test's skip message or a log
// line ("built without a GPU backend", "no GPU device: cudaErrorNoDevice ...").
std::string UnavailableReason();

absl::StatusOr<int> DeviceCount();
absl::Status SetDevice(int ordinal);
absl::StatusOr<int> CurrentDevice();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string pci_bus_id;  // "0000:3b:00.0": matches hwloc's PCI objects (NUMA placement)
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  int warp_size = 0;  // 32 on NVIDIA, 64 on most AMD parts: never assume
  int multiprocessors = 0;
};
// Sets `ordinal` current on the calling thread, then reads its properties.
absl::StatusOr<DeviceInfo> GetDeviceInfo(int ordinal);
// The ordinal, in this process's numbering, of the device with PCI bus id `pci_bus_id` (the form
// DeviceInfo::pci_bus_id gives; another process may number the same device differently).
// NotFound when no visible device has that bus id.
absl::StatusOr<int> DeviceByPciBusId(const std::string& pci_bus_id);

// Device memory on the current device. DeviceFree(nullptr) is a no-op.
absl::StatusOr<void*> DeviceAlloc(size_t bytes);
absl::Status DeviceFree(void* p);
// Page-locked host memory from the runtime (cudaMallocHost): the slow way to pin, kept for
// benchmark ceilings. T1 pins its own shared segment with HostRegister instead.
absl::StatusOr<void*> PinnedAlloc(size_t bytes);
absl::Status PinnedFree(void* p);

// Page-locks [p, p + bytes) for DMA, portable to every context and mapped into the device address
// space (kernels may read it in place). Unregister with the same `p`.
absl::Status HostRegister(void* p, size_t bytes);
absl::Status HostUnregister(void* p);
// The device-side address of registered (mapped) host memory. With unified addressing (every
// 64-bit CUDA/HIP platform kvtier supports) it equals `host`, but kernels must use this value.
absl::StatusOr<void*> DevicePointerOf(void* host);

// An inter-process handle for a DeviceAlloc'd region (CUDA/HIP IPC). The bytes are opaque and
// travel over the control socket; OpenIpc in another process maps the same memory on the device
// the handle came from, which must be current there.
inline constexpr size_t kIpcHandleBytes = 64;
struct IpcHandle {
  std::array<uint8_t, kIpcHandleBytes> bytes{};
};
absl::StatusOr<IpcHandle> ExportIpc(void* device_base);
absl::StatusOr<void*> OpenIpc(const IpcHandle& handle);
absl::Status CloseIpc(void* opened_base);

// An owned non-blocking stream on the device current at Create.
class Stream {
 public:
  static absl::StatusOr<Stream> Create();
  Stream() = default;
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  ~Stream();
  StreamHandle handle() const { return handle_; }
  absl::Status Synchronize() const;

 private:
  explicit Stream(StreamHandle h) : handle_(h) {}
  StreamHandle handle_ = nullptr;
};

// An owned event. `timing` events can be measured with ElapsedMs; the others are cheaper and are
// what completion signalling uses.
class Event {
 public:
  static absl::StatusOr<Event> Create(bool timing = false);
  Event() = default;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  ~Event();
  EventHandle handle() const { return handle_; }
  // Captures the work submitted to `stream` so far.
  absl::Status Record(StreamHandle stream) const;
  // True once the captured work has completed; false while it is pending.
  absl::StatusOr<bool> Done() const;
  absl::Status Synchronize() const;
  // Milliseconds between two recorded timing events.
  static absl::StatusOr<float> ElapsedMs(const Event& start, const Event& end);

 private:
  explicit Event(EventHandle h) : handle_(h) {}
  EventHandle handle_ = nullptr;
};

// Makes future work on `stream` wait for `event` (cross-stream ordering without blocking the host).
absl::Status StreamWaitEvent(StreamHandle stream, const Event& event);

// Copies between any two of: device memory, registered host memory, pageable host memory
// (direction inferred from unified addresses). Asynchronous with respect to the host when both
// sides are device or registered memory.
absl::Status CopyAsync(void* dst, const void* src, size_t bytes, StreamHandle stream);
absl::Status MemsetAsync(void* dst, int value, size_t bytes, StreamHandle stream);

// One piece of a batched copy.
struct CopyOp {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};
// Enqueues every op on `stream`, as DMA (no SMs taken): the batch as a whole is ordered after
// earlier work on `stream` and before later work, but ops within it may run in any order or at
// once, so no op may write bytes another op of the batch reads or writes. CUDA 12.8+ submits the
// batch through cudaMemcpyBatchAsync, 256 ops a call (not on the legacy default stream);
// otherwise one cudaMemcpyAsync per op. Stops at the first refusal and says which op(s).
absl::Status CopyBatchAsync(std::span<const CopyOp> ops, StreamHandle stream);

absl::Status DeviceSynchronize();

}  // namespace kvtier::gpu
