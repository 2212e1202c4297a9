// HostTier: T1, the shared pinned host DRAM tier (DESIGN.md "Tiers"). One shared-memory segment
// (memfd; 2 MiB huge pages when the system has them) bound to the NUMA node nearest the GPU, cut
// into fixed-size slots of slot_bytes each: slot i is bytes [i * slot_bytes, (i + 1) * slot_bytes)
// of the segment.
//
// Ready at once: Create returns as soon as the first part of the segment (first_ready_bytes) is
// faulted in (its DMA registration follows at once, see DmaRegistration); a background thread
// (DmaRegistration) does the rest chunk by chunk, in address order, and each chunk's slots become
// allocatable when it is done. Until then Allocate may answer ResourceExhausted with slots still to
// come: ready_slots() grows to capacity_slots(), and dma() tells the progress.
//
// Made for other processes: fd() is a memfd that the daemon hands to clients over SCM_RIGHTS. A
// process that receives it and mmaps it (MAP_SHARED, PROT_READ|PROT_WRITE, length size(), offset 0)
// sees the same bytes as this one, both ways, with no copy; whoever may map it may read and write
// every slot in it (DESIGN.md "Trust and isolation": one segment per pool). It may be mapped at
// once, while later chunks are still being faulted in: faulting is about page faults and pinning,
// not about what the mapping shows.
//
// Thread-safety: every method may be called from any thread. Read and Write on distinct slots run
// in parallel; on one slot the caller serialises them (leases: a block being written is never
// read).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "tiers/dma_registration.h"
#include "tiers/slot_allocator.h"
#include "tiers/storage_tier.h"

namespace kvtier {

class NumaPlacement;

enum class HugePages {
  kAuto,  // 2 MiB huge pages when the system has them reserved, else normal pages (logged)
  kOn,    // huge pages or fail at start
  kOff,   // normal pages (still asks for transparent huge pages)
};

// The [t1] section of the config. Validate() is called by Create; its error has every problem,
// one per line, each naming the setting.
struct HostTierOptions {
  uint64_t capacity_bytes = uint64_t{1} << 30;  // the segment's size
  // One block's payload at most. A multiple of 4096 so T2 can move slots with O_DIRECT.
  uint32_t slot_bytes = 256 * 1024;
  // PCI bus id of the device to place the segment near ("0000:3b:00.0"), usually the GPU. Empty:
  // the node of the thread calling Create.
  std::string numa_pci_bus_id;
  // The memfd's name (memfd_create; shows in /proc/<pid>/fd of every process holding it as
  // "/memfd:<name>"): a pool's own, so a look at a client's fds tells which segment it maps.
  std::string segment_name = "kvtier-t1";
  unsigned touch_threads = 0;  // threads faulting the segment in; 0 = hardware_concurrency
  HugePages huge_pages = HugePages::kAuto;
  // Registered with the GPU this much at a time; a multiple of slot_bytes so no slot straddles two
  // registrations (one DMA never spans two pinned ranges).
  uint64_t dma_chunk_bytes = uint64_t{1} << 30;
  // Create returns once this much of the segment (rounded up to whole slots and pages) is usable;
  // the rest grows in the background, in chunks from this size doubling up to dma_chunk_bytes.
  // 0: Create waits for the whole segment.
  uint64_t first_ready_bytes = uint64_t{64} << 20;
  // Tests only: runs on the growth thread before each chunk after the first is faulted in, with the
  // chunk's offset; a test slows or holds the growth with it to watch the tier serve meanwhile.
  std::function<void(uint64_t offset)> before_touch_for_test;

  absl::Status Validate() const;
};

// Where the segment landed, for the log and the metrics.
struct HostTierPlacement {
  int numa_node = 0;
  std::string numa_why;       // how the node was chosen
  bool numa_bound = false;    // false when the kernel refused the bind (pages go anywhere)
  size_t page_bytes = 4096;   // 2 MiB with huge pages
  bool huge_pages = false;    // hugetlb pages (transparent huge pages are not counted here)
  double create_seconds = 0;  // Create: segment + bind + the first part faulted in and registered
};

class HostTier final : public StorageTier {
 public:
  // Creates and binds the segment, and returns once its first part is usable; the rest is faulted
  // in and registered in the background (see above). Errors: InvalidArgument for bad options,
  // FailedPrecondition for huge_pages = on without huge pages, ResourceExhausted / Internal when
  // the memory cannot be had.
  static absl::StatusOr<std::unique_ptr<HostTier>> Create(const HostTierOptions& options);
  // Stops the growth (after the chunk in progress), unregisters, unmaps and closes fd(). Mappings
  // other processes hold stay valid: the memory lives until the last one is gone.
  ~HostTier() override;

  // StorageTier. Read and Write complete inline: `done` has run when they return.
  Tier tier() const override { return Tier::kT1; }
  uint32_t slot_bytes() const override { return slot_bytes_; }
  uint32_t capacity_slots() const override { return allocator_.capacity(); }
  absl::StatusOr<SlotId> Allocate() override;
  // A free of a slot that is not allocated is refused, logged and counted (write_errors is not
  // touched; see double_frees()).
  void Free(SlotId slot) override;
  // Copies record.payload_bytes (<= slot_bytes) from src. InvalidArgument for a bad slot or size.
  void Write(SlotId slot, const BlockRecord& record, const void* src, IoDone done) override;
  // Copies all slot_bytes of the slot into dst (T1 keeps no records).
  void Read(SlotId slot, void* dst, IoDone done) override;
  TierStats Stats() const override;

  // T1 only. The slot's slot_bytes bytes, for clients copying in place (DMA from/to GPU memory).
  // Precondition: slot < capacity_slots(). Valid while this object lives.
  std::byte* SlotData(SlotId slot) const { return base_ + size_t{slot} * slot_bytes_; }
  int fd() const { return fd_; }             // owned by this object; dup() it to keep it longer
  std::byte* base() const { return base_; }  // page-aligned; T2 registers [base, base+size)
  size_t size() const { return size_; }
  const HostTierPlacement& placement() const { return placement_; }
  // Progress of the growth: bytes ready and registered; Wait() for the whole segment.
  const DmaRegistration& dma() const { return *dma_; }
  // Slots that can be allocated at all now; capacity_slots() once the segment is grown in full.
  uint32_t ready_slots() const { return allocator_.ready(); }
  uint64_t double_frees() const { return allocator_.double_frees(); }

 private:
  HostTier(int fd, std::byte* base, size_t size, uint32_t slot_bytes);
  // Binds the segment to placement_.numa_node, starts the growth and waits for its first part.
  absl::Status BindAndGrow(const HostTierOptions& options, unsigned threads);
  bool ValidSlot(SlotId slot) const { return slot < allocator_.capacity(); }

  const int fd_;
  std::byte* const base_;
  const size_t size_;
  const uint32_t slot_bytes_;
  HostTierPlacement placement_;
  std::unique_ptr<NumaPlacement> numa_;  // used by the growth thread to fault chunks in
  SlotAllocator allocator_;
  std::unique_ptr<DmaRegistration> dma_;  // destroyed first in ~HostTier, before munmap
  IoCounters io_;
};

}  // namespace kvtier
