// DeviceTier: T0, the GPU HBM tier (DESIGN.md "Tiers"). One device allocation per GPU, made once
// at start-up (a pool that never grows or shrinks), cut into fixed-size slots of slot_bytes each:
// slot i is device bytes [base() + i * slot_bytes, base() + (i + 1) * slot_bytes).
//
// Made for other processes: ipc_handle() is a CUDA/HIP IPC handle of the whole pool, exported once
// at Create. A client on the same GPU opens it (gpu::OpenIpc, with that device current) and sees
// the pool at its own base address, so slot i is at opened_base + i * slot_bytes there; whoever
// has the handle may read and write every slot (DESIGN.md "Trust and isolation": one pool per
// trust domain). The bundled engine uses these slots as its paged KV cache; external engines copy
// device-to-device.
//
// Transfers. Write copies host -> device and Read device -> host, each direction on its own
// non-blocking stream owned by the tier (so demotions and promotions overlap: PCIe is full
// duplex), as DMA (gpu::CopyAsync, no SMs taken). The host side should be registered memory (the
// T1 segment): pageable memory works but is slow and makes the copy synchronous. Both calls return
// at once; an event recorded after the copy is waited for by the tier's completion thread, which
// then runs `done`. `done` runs on that thread in submission order, always (also for an argument
// or runtime error, which arrives as its Status), never on the caller's thread; it must not block.
// When `done` runs with OK the copy is complete and the buffers may be reused; with an error no
// copy of this call is still running either.
//
// Thread-safety: every method may be called from any thread. Write and Read set the calling
// thread's current device to options.device for the enqueue and restore the previous one. The
// StorageTier preconditions hold: no Free, Write or Read of a slot while a transfer on it is in
// flight (leases), and the host buffer stays valid until `done`.
//
// Variants: in the CPU-only build Create answers the runtime's FailedPrecondition ("built without
// a GPU backend"), and the daemon runs without T0.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/status.h"
#include "kernels/gpu_runtime.h"
#include "tiers/slot_allocator.h"
#include "tiers/storage_tier.h"

namespace kvtier {

// The [t0] section of the config. Validate() is called by Create; errors name "t0.<key>".
struct DeviceTierOptions {
  int device = 0;  // GPU ordinal, as the runtime numbers them (after CUDA/HIP_VISIBLE_DEVICES)
  // The pool's size, rounded down to whole slots. 0: free_fraction of the device's free memory at
  // Create (what the engine and other processes have not taken by then).
  uint64_t capacity_bytes = 0;
  double free_fraction = 0.5;  // in (0, 1]; used only when capacity_bytes is 0
  // One block's payload at most; equal to t1.slot_bytes so one slot moves as one DMA. A multiple
  // of 4096 (like T1: slots keep page alignment for DMA and O_DIRECT staging).
  uint32_t slot_bytes = 256 * 1024;

  absl::Status Validate() const;
};

class DeviceTier final : public StorageTier {
 public:
  // Validates `options`, selects the device, allocates the pool, exports its IPC handle and
  // creates the two streams and the completion thread. Errors: InvalidArgument for bad options;
  // FailedPrecondition (CPU-only build) or Unavailable (no device) from the runtime;
  // ResourceExhausted when the pool would hold no slot; Internal when the runtime refuses the
  // allocation or the export. Every message starts with "t0".
  static absl::StatusOr<std::unique_ptr<DeviceTier>> Create(const DeviceTierOptions& options);
  // Waits for every transfer in flight and runs its `done` (OK or its error), then destroys the
  // streams and frees the pool. Clients that opened the IPC handle must have closed it first: the
  // memory they see is this pool. No other call may run concurrently with or after it.
  ~DeviceTier() override;

  DeviceTier(const DeviceTier&) = delete;
  DeviceTier& operator=(const DeviceTier&) = delete;

  // StorageTier.
  Tier tier() const override { return Tier::kT0; }
  uint32_t slot_bytes() const override { return slot_bytes_; }
  uint32_t capacity_slots() const override { return allocator_.capacity(); }
  absl::StatusOr<SlotId> Allocate() override;
  // A free of a slot that is not allocated is refused, logged and counted (double_frees()).
  void Free(SlotId slot) override;
  // Copies record.payload_bytes (<= slot_bytes) from host `src` into the slot. InvalidArgument
  // (through `done`) for a bad slot or size.
  void Write(SlotId slot, const BlockRecord& record, const void* src, IoDone done) override;
  // Copies all slot_bytes of the slot into host `dst` (T0 keeps no records).
  void Read(SlotId slot, void* dst, IoDone done) override;
  TierStats Stats() const override;

  // T0 only. Device addresses in this process, valid while this object lives. Precondition for
  // SlotData: slot < capacity_slots().
  void* base() const { return base_; }
  void* SlotData(SlotId slot) const {
    return static_cast<std::byte*>(base_) + size_t{slot} * slot_bytes_;
  }
  size_t size() const { return size_; }  // capacity_slots() * slot_bytes()
  int device() const { return device_; }
  // The device's PCI bus id ("0000:3b:00.0", as gpu::DeviceInfo gives it), read at Create: how a
  // client finds the same GPU in its own numbering (gpu::DeviceByPciBusId).
  const std::string& pci_bus_id() const { return pci_bus_id_; }
  // The pool's IPC handle, for clients on this GPU (sent over the control socket).
  const gpu::IpcHandle& ipc_handle() const { return ipc_handle_; }
  uint64_t double_frees() const { return allocator_.double_frees(); }

 private:
  enum class Direction { kHostToDevice, kDeviceToHost };
  // One submitted transfer, waited for by the completion thread.
  struct Pending {
    std::optional<gpu::Event> event;           // recorded after the copy; empty when there is none
    const gpu::Stream* sync_stream = nullptr;  // without an event: synchronised instead, if set
    absl::Status status;                       // an error found at submission, else OK
    Direction direction = Direction::kHostToDevice;
    uint64_t bytes = 0;
    IoDone done;
  };

  DeviceTier(int device, std::string pci_bus_id, void* base, size_t size, uint32_t slot_bytes);
  // Creates the streams and starts the completion thread (Create's second half).
  absl::Status Start();
  // Enqueues one copy on `direction`'s stream and its completion.
  void Submit(Direction direction, void* dst, const void* src, size_t bytes, IoDone done);
  // Fills `p` with an event recorded after a copy of `bytes` on `stream`, or with the error.
  void EnqueueCopy(const gpu::Stream& stream, void* dst, const void* src, size_t bytes, Pending* p);
  // Hands `p` to the completion thread (also an argument error, so `done` still runs there).
  void Enqueue(Pending p);
  void CompletionLoop();
  // Blocks until `p`'s copy has finished; returns the status `done` gets.
  absl::Status WaitFor(Pending& p);
  absl::StatusOr<gpu::Event> TakeEvent();
  void ReturnEvent(gpu::Event event);
  bool ValidSlot(SlotId slot) const { return slot < allocator_.capacity(); }

  const int device_;
  const std::string pci_bus_id_;
  void* const base_;
  const size_t size_;
  const uint32_t slot_bytes_;
  SlotAllocator allocator_;
  gpu::IpcHandle ipc_handle_;
  gpu::Stream to_device_;  // host -> device (Write)
  gpu::Stream to_host_;    // device -> host (Read)

  // Serialise the copy and its event record per stream, so an event follows its own copy.
  std::mutex to_device_mu_;
  std::mutex to_host_mu_;

  std::mutex events_mu_;
  std::vector<gpu::Event> free_events_ ABSL_GUARDED_BY(events_mu_);  // reused: creation costs

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;  // work queued, or stopping_
  std::deque<Pending> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread completer_;

  IoCounters io_;
};

}  // namespace kvtier
