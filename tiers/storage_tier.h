// The interface every tier implements (DESIGN.md "Tiers"): fixed-size slots that hold one block's
// payload each, allocated and freed by the tier manager, with reads and writes that complete
// asynchronously. T1 (pinned host DRAM, host_tier.h) completes them inline with a memcpy; T2 (NVMe,
// nvme_tier.h) through io_uring; T0 (GPU HBM, device_tier.h) by DMA on its own streams.
//
// What a tier does not do: decide what to evict (index/ eviction policies, driven by the tier
// manager) or know which key lives where beyond what it must persist (T2 persists records so a
// restarted daemon finds its blocks; the block index is the authority while running).
//
// "Retry" and "Rejected" are normal outcomes of the data path, not failures: Allocate returns
// ResourceExhausted when the tier is full (the caller evicts and retries) and Unavailable when the
// tier has stopped admitting (disk full, failed device); both are counted, neither is logged as an
// error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "common/status.h"
#include "index/block_index.h"
#include "index/block_key.h"

namespace kvtier {

using SlotId = uint32_t;
inline constexpr SlotId kNoSlot = UINT32_MAX;

// What a tier is told about the payload it stores. T2 persists it beside the data.
struct BlockRecord {
  BlockKey key;
  uint64_t namespace_id = 0;   // low 64 bits of the namespace root (index/namespace.h)
  uint32_t payload_bytes = 0;  // <= the tier's slot_bytes()
  uint64_t checksum = 0;       // XXH3-64 of the payload's payload_bytes bytes
};

// Counters since start. Snapshots; cheap to take.
struct TierStats {
  uint64_t slot_bytes = 0;
  uint64_t capacity_slots = 0;
  uint64_t used_slots = 0;
  // Slots that may be allocated now. T1 grows it to capacity_slots after start (HostTier); the
  // other tiers leave it 0 (all their slots are ready when they open).
  uint64_t ready_slots = 0;
  uint64_t reads = 0, read_bytes = 0, read_errors = 0;
  uint64_t writes = 0, write_bytes = 0, write_errors = 0;
  uint64_t checksum_failures = 0;     // reads whose payload did not match its record (T2)
  uint64_t rejected_allocations = 0;  // Allocate answered ResourceExhausted or Unavailable
  bool admitting = true;              // false while the tier refuses new blocks
  // Why a tier stopped admitting or shrank, for operators (T2; 0 for tiers without the cause).
  uint64_t retired_slots = 0;      // slots never handed out again after a failed read/write/delete
  uint64_t metadata_failures = 0;  // failed record puts or deletes (T2's RocksDB)
  uint64_t admission_stops = 0;    // times admission stopped (full disk, failed metadata put)
  uint64_t admission_probes = 0;   // checks, while stopped, whether room came back
  uint64_t admission_resumes = 0;  // probes that found room: admission started again
};

// The I/O counts every tier keeps for TierStats, bumped from any thread (relaxed: statistics).
struct IoCounters {
  std::atomic<uint64_t> reads{0}, read_bytes{0}, read_errors{0};
  std::atomic<uint64_t> writes{0}, write_bytes{0}, write_errors{0};

  void Read(uint64_t bytes) {
    reads.fetch_add(1, std::memory_order_relaxed);
    read_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  void Write(uint64_t bytes) {
    writes.fetch_add(1, std::memory_order_relaxed);
    write_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  void ReadError() { read_errors.fetch_add(1, std::memory_order_relaxed); }
  void WriteErrors(uint64_t n = 1) { write_errors.fetch_add(n, std::memory_order_relaxed); }
  // Copies the six counts into `s`.
  void Fill(TierStats& s) const {
    s.reads = reads.load(std::memory_order_relaxed);
    s.read_bytes = read_bytes.load(std::memory_order_relaxed);
    s.read_errors = read_errors.load(std::memory_order_relaxed);
    s.writes = writes.load(std::memory_order_relaxed);
    s.write_bytes = write_bytes.load(std::memory_order_relaxed);
    s.write_errors = write_errors.load(std::memory_order_relaxed);
  }
};

// Runs once when an operation completes: OK, or why not (DataLoss for a checksum mismatch, Internal
// with errno text for an I/O error). Called on the tier's completion context (inline for T1, the
// tier's completion or read-verify threads for T2); it must not block.
using IoDone = std::function<void(absl::Status)>;

class StorageTier {
 public:
  virtual ~StorageTier() = default;

  virtual Tier tier() const = 0;
  virtual uint32_t slot_bytes() const = 0;
  virtual uint32_t capacity_slots() const = 0;

  // Takes a free slot. ResourceExhausted when every slot is taken; Unavailable while the tier is
  // not admitting. Thread-safe. O(1).
  virtual absl::StatusOr<SlotId> Allocate() = 0;
  // Returns `slot` to the free set (for T2, after deleting its record). Precondition: allocated,
  // no I/O in flight on it. Thread-safe. O(1).
  virtual void Free(SlotId slot) = 0;

  // Stores record.payload_bytes bytes from `src` into `slot` and, for a persistent tier, `record`
  // after them, in that order; `done` runs when both are complete (durable as configured). For T2,
  // `src` must lie in memory registered with the tier (the T1 segment) so the transfer is one DMA.
  virtual void Write(SlotId slot, const BlockRecord& record, const void* src, IoDone done) = 0;
  // Copies the payload of `slot` into `dst` (payload_bytes of its record; slot_bytes for a tier
  // that keeps no records) and, for T2, verifies its checksum first: on a mismatch `done` gets
  // DataLoss, the record is dropped and counted, and `dst` must not be used.
  virtual void Read(SlotId slot, void* dst, IoDone done) = 0;
  // Read, told what the caller knows of the block (its key, namespace, payload size and checksum;
  // checksum 0 = unknown). Slot tiers ignore it (the default); a key-addressed tier (T3, the remote
  // store: shared_tier.h) has no slots and reads by record.key, checking the value against it.
  virtual void ReadRecord(SlotId slot, const BlockRecord& record, void* dst, IoDone done) {
    (void)record;
    Read(slot, dst, std::move(done));
  }

  virtual TierStats Stats() const = 0;
};

}  // namespace kvtier
