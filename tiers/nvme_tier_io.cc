// NvmeTier's data path: Write and Read, and their halves on the completion threads (group commit
// of finished writes, checksum verification of finished reads). Contracts in nvme_tier.h.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "common/checksum.h"
#include "common/log.h"
#include "tiers/nvme_metadata.h"
#include "tiers/nvme_ring.h"
#include "tiers/nvme_tier.h"
#include "tiers/nvme_verify_pool.h"
#include "tiers/slot_file.h"

namespace kvtier {
namespace {

constexpr uintptr_t kAlign = 4096;
// Payloads up to this size are verified on the completion thread: hashing them (~10 us) costs
// less than handing them to the verify pool.
constexpr uint32_t kInlineVerifyBytes = 64 << 10;

uint32_t RoundUp(uint32_t bytes) {
  return static_cast<uint32_t>((bytes + kAlign - 1) & ~(kAlign - 1));
}

bool Aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & (kAlign - 1)) == 0; }

// What a CQE result that is not the full length means.
std::string IoError(int res, uint32_t len) {
  if (res < 0) return std::strerror(-res);
  return fmt::format("short transfer of {} of {} bytes", res, len);
}

// A short O_DIRECT write to a regular file means the file system ran out of room part-way (the
// kernel reports the bytes it wrote instead of ENOSPC), so it counts as a full disk too.
bool DiskFull(int res) { return res == -ENOSPC || res == -EDQUOT || res == -EFBIG || res >= 0; }

}  // namespace

void NvmeTier::Write(SlotId slot, const BlockRecord& record, const void* src, IoDone done) {
  if (slot >= total_slots_ || record.payload_bytes == 0 ||
      record.payload_bytes > options_.slot_bytes || !Aligned(src)) {
    done(absl::InvalidArgumentError(
        fmt::format("t2 write: slot {} (of {}), {} payload bytes (slot holds {}), src {} (must be "
                    "4096-aligned)",
                    slot, total_slots_, record.payload_bytes, options_.slot_bytes, src)));
    return;
  }
  bool stored = false;
  uint64_t old_epoch = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Slot& s = slots_[slot];
    if (s.state == SlotState::kFree) {
      done(absl::FailedPreconditionError(fmt::format("t2 write: slot {} is not allocated", slot)));
      return;
    }
    stored = s.state == SlotState::kStored;
    old_epoch = s.epoch;
  }
  // Overwriting a stored block: its record goes first, so a crash mid-write leaves no record
  // pointing at half-new bytes.
  if (stored) {
    const absl::Status s = DropRecord(slot, old_epoch);
    if (!s.ok()) {
      done(s);
      return;
    }
  }
  const uint32_t len = RoundUp(record.payload_bytes);
  const uint32_t dir = DirOf(slot);
  PendingWrite pw{slot, record, next_epoch_++, std::move(done)};
  RingOp op;
  op.write = true;
  op.buf = const_cast<void*>(src);
  op.len = len;
  op.offset = OffsetOf(slot);
  op.done = [this, dir, len, pw = std::move(pw)](int res) mutable {
    OnWriteDone(dir, std::move(pw), len, res);
  };
  rings_[dir]->Submit(std::move(op));
}

void NvmeTier::OnWriteDone(uint32_t dir, PendingWrite write, uint32_t len, int res) {
  if (res == static_cast<int>(len)) {
    pending_[dir].push_back(std::move(write));  // committed at the end of this completion batch
    return;
  }
  io_.WriteErrors();
  const std::string why = fmt::format("writing slot {} ({} at offset {}): {}", write.slot,
                                      files_[dir]->path(), OffsetOf(write.slot), IoError(res, len));
  if (DiskFull(res)) {  // res != len here, so res >= 0 is a short write
    StopAdmitting(why);
  } else {
    Retire(write.slot, why);
  }
  write.done(absl::InternalError(fmt::format("t2: {}", why)));
}

void NvmeTier::CommitBatch(uint32_t dir) {
  std::vector<PendingWrite>& batch = pending_[dir];
  if (batch.empty()) return;
  absl::Status status;
  if (options_.durability == T2Durability::kFdatasync) status = files_[dir]->Sync();
  if (status.ok()) {
    std::vector<StoredRecord> records;
    records.reserve(batch.size());
    for (const PendingWrite& w : batch) records.push_back(StoredRecord{w.record, w.slot, w.epoch});
    status = metadata_->PutBatch(records);
  }
  if (!status.ok()) {
    io_.WriteErrors(batch.size());
    ++metadata_failures_;
    StopAdmitting(fmt::format("committing {} writes: {}", batch.size(), status.ToString()));
  }
  FinishCommit(batch, status);
  batch.clear();
}

void NvmeTier::FinishCommit(std::vector<PendingWrite>& batch, const absl::Status& status) {
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const PendingWrite& w : batch) {
      Slot& s = slots_[w.slot];
      s.record = w.record;
      s.epoch = w.epoch;
      s.state = SlotState::kStored;
    }
  }
  for (PendingWrite& w : batch) {
    if (status.ok()) {
      io_.Write(w.record.payload_bytes);
    }
    w.done(status);
  }
}

void NvmeTier::Read(SlotId slot, void* dst, IoDone done) {
  if (slot >= total_slots_ || !Aligned(dst)) {
    done(absl::InvalidArgumentError(fmt::format(
        "t2 read: slot {} (of {}), dst {} (must be 4096-aligned)", slot, total_slots_, dst)));
    return;
  }
  BlockRecord record;
  uint64_t epoch = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Slot& s = slots_[slot];
    if (s.state != SlotState::kStored) {
      done(absl::NotFoundError(fmt::format("t2 read: slot {} holds no block", slot)));
      return;
    }
    record = s.record;
    epoch = s.epoch;
  }
  const uint32_t len = RoundUp(record.payload_bytes);
  RingOp op;
  op.buf = dst;
  op.len = len;
  op.offset = OffsetOf(slot);
  op.done = [this, slot, record, epoch, dst, len, done = std::move(done)](int res) mutable {
    OnReadDone(slot, record, epoch, dst, len, res, std::move(done));
  };
  rings_[DirOf(slot)]->Submit(std::move(op));
}

void NvmeTier::OnReadDone(SlotId slot, const BlockRecord& record, uint64_t epoch, void* dst,
                          uint32_t len, int res, IoDone done) {
  if (res != static_cast<int>(len)) {
    io_.ReadError();
    const std::string why =
        fmt::format("reading slot {} (key {}): {}", slot, record.key.ToHex(), IoError(res, len));
    Retire(slot, why);
    done(absl::InternalError(fmt::format("t2: {}", why)));
    return;
  }
  if (record.payload_bytes <= kInlineVerifyBytes) {
    VerifyRead(slot, record, epoch, dst, done);
    return;
  }
  verify_pool_->Post([this, slot, record, epoch, dst, done = std::move(done)] {
    VerifyRead(slot, record, epoch, dst, done);
  });
}

void NvmeTier::VerifyRead(SlotId slot, const BlockRecord& record, uint64_t epoch, const void* dst,
                          const IoDone& done) {
  const uint64_t sum = PayloadChecksum(dst, record.payload_bytes);
  if (sum != record.checksum) {
    ++checksum_failures_;
    const auto [path, offset] = SlotLocation(slot);
    KVTIER_LOG(kError, "t2",
               "checksum mismatch for key {} in slot {} ({} at offset {}): stored {:016x}, read "
               "{:016x}; dropping the block",
               record.key.ToHex(), slot, path, offset, record.checksum, sum);
    const absl::Status s = DropRecord(slot, epoch);
    if (!s.ok()) KVTIER_LOG(kError, "t2", "dropping key {}: {}", record.key.ToHex(), s.ToString());
    done(absl::DataLossError(fmt::format("t2: checksum mismatch for key {}", record.key.ToHex())));
    return;
  }
  io_.Read(record.payload_bytes);
  done(absl::OkStatus());
}

absl::Status NvmeTier::DropRecord(SlotId slot, uint64_t epoch) {
  BlockRecord record;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = slots_[slot];
    if (s.state != SlotState::kStored || s.epoch != epoch) return absl::OkStatus();
    record = s.record;
    s.state = SlotState::kAllocated;
  }
  const absl::Status status = metadata_->Delete(record.key, slot);
  if (!status.ok()) ++metadata_failures_;
  // A record we could not delete may come back at restart pointing at bytes we will overwrite:
  // never reuse the slot (its checksum would catch it, but a miss is better than a DataLoss).
  if (!status.ok())
    Retire(slot,
           fmt::format("deleting the record of key {}: {}", record.key.ToHex(), status.ToString()));
  return status;
}

}  // namespace kvtier
