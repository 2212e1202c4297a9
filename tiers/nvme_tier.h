// T2: the NVMe tier (DESIGN.md "Tiers", issue 3 "T2: NVMe tier").
//
// Layout. Each configured directory (one per device) holds one slot file of
// capacity_bytes / slot_bytes slots, opened O_DIRECT, with its own io_uring and completion thread.
// Slot s lives in directory s % N at offset (s / N) * slot_bytes, so consecutive allocations spread
// over the devices. The records of what the slots hold live in RocksDB (nvme_metadata.h).
//
// Write order (the crash-safety contract): payload written → (durability kFdatasync: the slot file
// fdatasync'ed) → record put to RocksDB (synced under kFdatasync) → `done`. A daemon killed at any
// instant restarts with every block whose `done` got OK (under kFdatasync: also across power loss)
// and never with a record whose payload was not completely written. Writes that finish together
// are committed together: one fdatasync and one RocksDB batch per completion batch per device.
// Free: RocksDB delete → slot back in the free set.
//
// Reads verify the payload's XXH3-64 against the record before `done` gets OK. A mismatch gives
// DataLoss, counts a checksum failure, logs the key and deletes the record; the slot stays
// allocated (the caller, told DataLoss, drops the block and Frees the slot as for any miss).
// Payloads over 64 KiB are verified on a small pool of threads (options.verify_threads), not on
// the directory's completion thread, so reads are not capped by one core's hashing speed.
//
// Failures. ENOSPC, EDQUOT, EFBIG or a short write, or any failed metadata put, stops admission
// (Allocate → Unavailable, Stats().admitting = false); the write's `done` gets the error. While
// stopped, an Allocate at most every options.admission_probe_interval_ms probes for room: it
// reserves the byte range of the slot it would hand out next (fallocate) and rewrites the layout
// stamp in RocksDB (synced, resuming RocksDB first); if both succeed admission resumes and the
// Allocate goes on. Each stop, probe and resume is counted in Stats(); stops and resumes are
// logged, failed probes once per 30 s with their count. Any other failed write, any failed read and
// any failed record delete retires the slot: it is not reused after its Free. Every failure is
// counted and logged; reads of other blocks go on.
//
// Buffers. `src`/`dst` must be aligned to 4096 and have room for payload_bytes rounded up to 4096
// (at most slot_bytes): O_DIRECT moves whole 4 KiB blocks. A write stores src's bytes up to that
// boundary as they are: the caller zeroes the padding past payload_bytes (the tier manager does),
// so that no stale bytes of an earlier user of the buffer reach the disk. Inside
// options.registered_ranges a transfer uses a fixed buffer (one DMA, no per-I/O pinning) once that
// part of the range is registered; elsewhere, and before, it falls back to a plain O_DIRECT
// read/write, which is correct but pins pages per I/O. A misaligned buffer gets InvalidArgument.
//
// Registered ranges are registered as they become ready, never all at Open (nvme_ring.h): the T1
// segment grows in the background (DmaRegistration), and each ring registers a part of it once T1
// reports that part ready, before its slots become allocatable. So Open pins only what T1 has
// ready (its first 64 MiB), and a daemon with T2 serves as soon as one without. fixed_buffers()
// tells how far it got.
//
// Thread-safety: every method may be called from any thread. `done` runs on the directory's
// completion thread or, for a read of over 64 KiB, on a verify thread (inline on the caller's
// thread for an argument error) and must not block. Preconditions of StorageTier hold: no Free,
// Write or Read of a slot while I/O on it is in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tiers/nvme_options.h"
#include "tiers/storage_tier.h"

namespace kvtier {

class NvmeMetadata;
class NvmeRing;
class SlotFile;
class VerifyPool;
struct StoredRecord;

// Called once per block found in RocksDB at start, before Open returns, so the caller can refill
// its block index. The slot counts as allocated: the caller Frees it if it does not keep the block.
using T2RecoveryVisitor = std::function<void(const BlockRecord& record, SlotId slot)>;

// The fixed buffers of every directory's ring, summed (each ring registers every range).
struct T2FixedBuffers {
  uint64_t bytes = 0;             // of registered_ranges, times the directories
  uint64_t registered_bytes = 0;  // registered so far; == bytes once T1 is ready in full
  uint64_t fixed_ops = 0;         // transfers submitted as READ_FIXED / WRITE_FIXED
  uint64_t plain_ops = 0;         // as plain READ / WRITE (outside a registered part)
  bool sparse = false;            // registered part by part (false: all at once when all ready)
};

class NvmeTier final : public StorageTier {
 public:
  // Validates `options`, opens (or creates) the slot files and the metadata database, rebuilds the
  // slot table from RocksDB without reading payloads (warm restart; the time and rate are logged),
  // hands every recovered block to `visitor` (may be null), and starts the rings. On failure the
  // slot files and metadata directory this call created are removed again (a partly reserved
  // file would refuse the next start); those that existed before are left as they were.
  static absl::StatusOr<std::unique_ptr<NvmeTier>> Open(const NvmeTierOptions& options,
                                                        const T2RecoveryVisitor& visitor);
  // Waits for in-flight I/O (its `done`s run), then closes everything.
  ~NvmeTier() override;

  Tier tier() const override { return Tier::kT2; }
  uint32_t slot_bytes() const override { return options_.slot_bytes; }
  uint32_t capacity_slots() const override { return total_slots_; }

  // O(1), except that while admission is stopped one call per probe interval probes for room
  // (one fallocate and one synced RocksDB put; see above).
  absl::StatusOr<SlotId> Allocate() override;
  void Free(SlotId slot) override;
  void Write(SlotId slot, const BlockRecord& record, const void* src, IoDone done) override;
  void Read(SlotId slot, void* dst, IoDone done) override;
  TierStats Stats() const override;

  // Where `slot` lives: the slot file's path and the byte offset. For tools and fault tests.
  std::pair<std::string, uint64_t> SlotLocation(SlotId slot) const;
  // The slot files and metadata directory Open created (none were there): what a caller whose own
  // start failed after Open removes again, once the tier is closed.
  const std::vector<std::string>& created_paths() const { return created_; }
  T2FixedBuffers fixed_buffers() const;
  // Blocks recovered at Open and the seconds the rebuild took.
  uint64_t recovered_blocks() const { return recovered_blocks_; }
  double recovery_seconds() const { return recovery_seconds_; }

 private:
  enum class SlotState : uint8_t { kFree, kAllocated, kStored };
  struct Slot {
    BlockRecord record;  // meaningful in kStored
    uint64_t epoch = 0;
    SlotState state = SlotState::kFree;
    bool retired = false;  // never handed out again
  };
  struct PendingWrite {
    SlotId slot;
    BlockRecord record;
    uint64_t epoch;
    IoDone done;
  };

  explicit NvmeTier(const NvmeTierOptions& options);
  absl::Status OpenFilesAndMetadata();
  absl::Status Recover(const T2RecoveryVisitor& visitor);
  // Puts one scanned record in the slot table, or in *stale if it must be deleted.
  void AdoptRecord(const StoredRecord& r, std::vector<StoredRecord>* stale);
  absl::Status StartRings();
  uint32_t DirOf(SlotId slot) const { return slot % num_dirs_; }
  uint64_t OffsetOf(SlotId slot) const { return uint64_t{slot / num_dirs_} * options_.slot_bytes; }

  // Completion-thread halves of Write and Read (nvme_tier_io.cc).
  void OnWriteDone(uint32_t dir, PendingWrite write, uint32_t len, int res);
  void CommitBatch(uint32_t dir);
  void FinishCommit(std::vector<PendingWrite>& batch, const absl::Status& status);
  void OnReadDone(SlotId slot, const BlockRecord& record, uint64_t epoch, void* dst, uint32_t len,
                  int res, IoDone done);
  // Checks the payload in `dst` against record.checksum and runs `done` (verify pool or inline).
  void VerifyRead(SlotId slot, const BlockRecord& record, uint64_t epoch, const void* dst,
                  const IoDone& done);
  // Deletes the record of `slot` (if it still is `epoch`'s) and leaves the slot allocated.
  absl::Status DropRecord(SlotId slot, uint64_t epoch);
  void StopAdmitting(const std::string& why);
  void Retire(SlotId slot, const std::string& why);
  // While not admitting: if a probe is due, probes for room and resumes admission on success.
  // Called by Allocate, only while not admitting, without mu_ held.
  void MaybeProbeAdmission();
  absl::Status ProbeRoom(SlotId slot);

  const NvmeTierOptions options_;
  const uint32_t num_dirs_;
  const uint32_t total_slots_;
  std::unique_ptr<NvmeMetadata> metadata_;
  std::vector<std::unique_ptr<SlotFile>> files_;  // [num_dirs_]
  // Writes whose payload is written and whose record is not yet put, per directory. Each vector is
  // touched only by its directory's completion thread.
  std::vector<std::vector<PendingWrite>> pending_;

  mutable std::mutex mu_;
  std::vector<Slot> slots_;   // [total_slots_], guarded by mu_
  std::vector<SlotId> free_;  // free, unretired slots; back is handed out next; guarded by mu_
  uint64_t used_ = 0;         // slots not kFree; guarded by mu_
  bool admitting_ = true;     // guarded by mu_
  bool probing_ = false;      // a probe is running; guarded by mu_
  std::chrono::steady_clock::time_point last_probe_;  // guarded by mu_
  // The last "still not admitting" line and the failed probes since: one line per
  // kProbeLogInterval, not one per probe. Guarded by mu_.
  std::chrono::steady_clock::time_point last_probe_log_;
  uint64_t failed_probes_unlogged_ = 0;
  uint64_t retired_ = 0;  // slots with retired set; guarded by mu_
  uint64_t admission_stops_ = 0, admission_probes_ = 0, admission_resumes_ = 0;  // guarded by mu_

  std::atomic<uint64_t> next_epoch_{1};
  IoCounters io_;
  std::atomic<uint64_t> checksum_failures_{0}, rejected_{0}, metadata_failures_{0};
  uint64_t recovered_blocks_ = 0;
  double recovery_seconds_ = 0;
  // Slot files and the metadata directory this Open created: removed again if it fails.
  std::vector<std::string> created_;

  // Destroyed after the rings (which hand it their last reads) and before the rest.
  std::unique_ptr<VerifyPool> verify_pool_;
  // Last: destroyed first, so no completion runs while the rest is torn down.
  std::vector<std::unique_ptr<NvmeRing>> rings_;  // [num_dirs_]
};

}  // namespace kvtier
