// GPU-variant implementation of kernels/gpu_runtime.h over the vendor runtime (CUDA spelling; HIP
// through kernels/gpu_vendor.h). Host code only: compiled by the host compiler.
#include "kernels/gpu_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/gpu_vendor.h"
#include "kernels/launch_status.h"

namespace kvtier::gpu {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) <= kIpcHandleBytes, "IPC handle does not fit");

// Errors from a failed call are not sticky in the runtime, but the "last error" slot keeps them;
// clear it so the next call's check does not see a stale failure.
absl::Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();
  std::string msg =
      fmt::format("{}: {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err));
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    return absl::UnavailableError(std::move(msg));
  }
  return absl::InternalError(std::move(msg));
}

cudaStream_t NativeStream(StreamHandle s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t NativeEvent(EventHandle e) { return static_cast<cudaEvent_t>(e); }

}  // namespace

absl::Status StatusFromVendorCode(int code, std::string_view what) {
  return Check(static_cast<cudaError_t>(code), std::string(what).c_str());
}

#if defined(KVTIER_GPU_CUDA)
const char* BackendName() { return "cuda"; }
#else
const char* BackendName() { return "hip"; }
#endif

std::string UnavailableReason() {
  auto count = DeviceCount();
  if (!count.ok()) return fmt::format("no usable GPU: {}", std::string(count.status().message()));
  if (*count == 0) return "no GPU device on this machine";
  return "";
}

absl::StatusOr<int> DeviceCount() {
  int n = 0;
  KVTIER_RETURN_IF_ERROR(Check(cudaGetDeviceCount(&n), "cudaGetDeviceCount"));
  return n;
}

absl::Status SetDevice(int ordinal) {
  return Check(cudaSetDevice(ordinal), fmt::format("cudaSetDevice({})", ordinal).c_str());
}

absl::StatusOr<int> CurrentDevice() {
  int d = 0;
  KVTIER_RETURN_IF_ERROR(Check(cudaGetDevice(&d), "cudaGetDevice"));
  return d;
}

absl::StatusOr<DeviceInfo> GetDeviceInfo(int ordinal) {
  KVTIER_RETURN_IF_ERROR(SetDevice(ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  cudaDeviceProp prop;
  KVTIER_RETURN_IF_ERROR(Check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties"));
  info.name = prop.name;
  char buf[64] = {};
  KVTIER_RETURN_IF_ERROR(
      Check(cudaDeviceGetPCIBusId(buf, sizeof(buf), ordinal), "cudaDeviceGetPCIBusId"));
  info.pci_bus_id = buf;
  size_t free_b = 0, total_b = 0;
  KVTIER_RETURN_IF_ERROR(Check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
  info.free_bytes = free_b;
  info.total_bytes = total_b;
  KVTIER_RETURN_IF_ERROR(
      Check(cudaDeviceGetAttribute(&info.warp_size, cudaDevAttrWarpSize, ordinal),
            "cudaDeviceGetAttribute(warp size)"));
  KVTIER_RETURN_IF_ERROR(
      Check(cudaDeviceGetAttribute(&info.multiprocessors, cudaDevAttrMultiProcessorCount, ordinal),
            "cudaDeviceGetAttribute(multiprocessors)"));
  return info;
}

absl::StatusOr<int> DeviceByPciBusId(const std::string& pci_bus_id) {
  int ordinal = -1;
  const cudaError_t err = cudaDeviceGetByPCIBusId(&ordinal, pci_bus_id.c_str());
  // An id that names no visible device (or is not an id) is an answer, not a runtime failure.
  if (err == cudaErrorInvalidDevice || err == cudaErrorInvalidValue) {
    (void)cudaGetLastError();
    return absl::NotFoundError(fmt::format("no visible GPU has PCI bus id '{}'", pci_bus_id));
  }
  KVTIER_RETURN_IF_ERROR(Check(err, "cudaDeviceGetByPCIBusId"));
  return ordinal;
}

absl::StatusOr<void*> DeviceAlloc(size_t bytes) {
  void* p = nullptr;
  KVTIER_RETURN_IF_ERROR(
      Check(cudaMalloc(&p, bytes), fmt::format("cudaMalloc({})", bytes).c_str()));
  return p;
}

absl::Status DeviceFree(void* p) { return p ? Check(cudaFree(p), "cudaFree") : absl::OkStatus(); }

absl::StatusOr<void*> PinnedAlloc(size_t bytes) {
  void* p = nullptr;
  KVTIER_RETURN_IF_ERROR(
      Check(cudaMallocHost(&p, bytes), fmt::format("cudaMallocHost({})", bytes).c_str()));
  return p;
}

absl::Status PinnedFree(void* p) {
  return p ? Check(cudaFreeHost(p), "cudaFreeHost") : absl::OkStatus();
}

absl::Status HostRegister(void* p, size_t bytes) {
  return Check(cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped),
               fmt::format("cudaHostRegister({} bytes)", bytes).c_str());
}

absl::Status HostUnregister(void* p) { return Check(cudaHostUnregister(p), "cudaHostUnregister"); }

absl::StatusOr<void*> DevicePointerOf(void* host) {
  void* d = nullptr;
  KVTIER_RETURN_IF_ERROR(Check(cudaHostGetDevicePointer(&d, host, 0), "cudaHostGetDevicePointer"));
  return d;
}

absl::StatusOr<IpcHandle> ExportIpc(void* device_base) {
  cudaIpcMemHandle_t h;
  KVTIER_RETURN_IF_ERROR(Check(cudaIpcGetMemHandle(&h, device_base), "cudaIpcGetMemHandle"));
  IpcHandle out;
  std::memcpy(out.bytes.data(), &h, sizeof(h));
  return out;
}

absl::StatusOr<void*> OpenIpc(const IpcHandle& handle) {
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes.data(), sizeof(h));
  void* p = nullptr;
  KVTIER_RETURN_IF_ERROR(
      Check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle"));
  return p;
}

absl::Status CloseIpc(void* opened_base) {
  return Check(cudaIpcCloseMemHandle(opened_base), "cudaIpcCloseMemHandle");
}

absl::StatusOr<Stream> Stream::Create() {
  cudaStream_t s = nullptr;
  KVTIER_RETURN_IF_ERROR(
      Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  return Stream(s);
}

Stream::Stream(Stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (handle_) (void)cudaStreamDestroy(NativeStream(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
  if (handle_) (void)cudaStreamDestroy(NativeStream(handle_));
}

absl::Status Stream::Synchronize() const {
  return Check(cudaStreamSynchronize(NativeStream(handle_)), "cudaStreamSynchronize");
}

absl::StatusOr<Event> Event::Create(bool timing) {
  cudaEvent_t e = nullptr;
  KVTIER_RETURN_IF_ERROR(
      Check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
            "cudaEventCreateWithFlags"));
  return Event(e);
}

Event::Event(Event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_) (void)cudaEventDestroy(NativeEvent(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (handle_) (void)cudaEventDestroy(NativeEvent(handle_));
}

absl::Status Event::Record(StreamHandle stream) const {
  return Check(cudaEventRecord(NativeEvent(handle_), NativeStream(stream)), "cudaEventRecord");
}

absl::StatusOr<bool> Event::Done() const {
  const cudaError_t err = cudaEventQuery(NativeEvent(handle_));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  KVTIER_RETURN_IF_ERROR(Check(err, "cudaEventQuery"));
  return true;
}

absl::Status Event::Synchronize() const {
  return Check(cudaEventSynchronize(NativeEvent(handle_)), "cudaEventSynchronize");
}

absl::StatusOr<float> Event::ElapsedMs(const Event& start, const Event& end) {
  float ms = 0;
  KVTIER_RETURN_IF_ERROR(
      Check(cudaEventElapsedTime(&ms, NativeEvent(start.handle_), NativeEvent(end.handle_)),
            "cudaEventElapsedTime"));
  return ms;
}

absl::Status StreamWaitEvent(StreamHandle stream, const Event& event) {
  return Check(cudaStreamWaitEvent(NativeStream(stream), NativeEvent(event.handle()), 0),
               "cudaStreamWaitEvent");
}

absl::Status CopyAsync(void* dst, const void* src, size_t bytes, StreamHandle stream) {
  return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, NativeStream(stream)),
               "cudaMemcpyAsync");
}

absl::Status MemsetAsync(void* dst, int value, size_t bytes, StreamHandle stream) {
  return Check(cudaMemsetAsync(dst, value, bytes, NativeStream(stream)), "cudaMemsetAsync");
}

namespace {

absl::Status CopyEachAsync(std::span<const CopyOp> ops, StreamHandle stream) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const CopyOp& op = ops[i];
    const cudaError_t err =
        cudaMemcpyAsync(op.dst, op.src, op.bytes, cudaMemcpyDefault, NativeStream(stream));
    if (err != cudaSuccess) {
      return Check(
          err,
          fmt::format("cudaMemcpyAsync (op {} of {}, {} bytes)", i, ops.size(), op.bytes).c_str());
    }
  }
  return absl::OkStatus();
}

#if defined(KVTIER_GPU_CUDA) && CUDART_VERSION >= 12080
// CUDA 12.8+: up to kOpsPerBatchCall copies per call, which spares the per-copy submission cost
// that dominates small copies. Measured on an H200 (tests/bench/gpu_transfer_bench.cc): 32 KiB
// copies went from 11 GB/s (one call each) to 45 GB/s in one call of 16384, and to 54 GB/s in
// calls of 256; calls of 64-512 were within noise of each other, larger ones slower (16 KiB
// host->device copies: 5.6 GB/s in one call of 32768).
constexpr size_t kOpsPerBatchCall = 256;

absl::Status CopyBatchCall(std::span<const CopyOp> ops, size_t first, size_t total,
                           StreamHandle stream) {
  std::vector<void*> dsts(ops.size());
  std::vector<const void*> srcs(ops.size());
  std::vector<size_t> sizes(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    dsts[i] = ops[i].dst;
    srcs[i] = ops[i].src;
    sizes[i] = ops[i].bytes;
  }
  cudaMemcpyAttributes attrs = {};
  attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attrs_index = 0;
#if CUDART_VERSION >= 13000
  const cudaError_t err = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), ops.size(),
                                               &attrs, &attrs_index, 1, NativeStream(stream));
  const std::string which = fmt::format("ops {}..{}", first, first + ops.size() - 1);
#else
  size_t fail = ops.size();
  const cudaError_t err =
      cudaMemcpyBatchAsync(dsts.data(), const_cast<void**>(srcs.data()), sizes.data(), ops.size(),
                           &attrs, &attrs_index, 1, &fail, NativeStream(stream));
  const std::string which = fail < ops.size()
                                ? fmt::format("op {}", first + fail)
                                : fmt::format("ops {}..{}", first, first + ops.size() - 1);
#endif
  if (err == cudaSuccess) return absl::OkStatus();
  return Check(err, fmt::format("cudaMemcpyBatchAsync ({} of {})", which, total).c_str());
}

absl::Status CopyBatchNative(std::span<const CopyOp> ops, StreamHandle stream) {
  for (size_t i = 0; i < ops.size(); i += kOpsPerBatchCall) {
    const size_t n = std::min(kOpsPerBatchCall, ops.size() - i);
    KVTIER_RETURN_IF_ERROR(CopyBatchCall(ops.subspan(i, n), i, ops.size(), stream));
  }
  return absl::OkStatus();
}
#endif

}  // namespace

absl::Status CopyBatchAsync(std::span<const CopyOp> ops, StreamHandle stream) {
#if defined(KVTIER_GPU_CUDA) && CUDART_VERSION >= 12080
  // The batch call refuses the legacy default stream; one op gains nothing from it.
  if (stream != nullptr && ops.size() > 1) return CopyBatchNative(ops, stream);
#endif
  return CopyEachAsync(ops, stream);
}

absl::Status DeviceSynchronize() { return Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace kvtier::gpu
