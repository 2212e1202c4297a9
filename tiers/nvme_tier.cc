// NvmeTier: start-up (files, metadata, warm restart), slot allocation and stats. The data path
// (Write, Read and their completions) is in nvme_tier_io.cc.
#include "tiers/nvme_tier.h"

#include <fmt/format.h>
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "common/log.h"
#include "tiers/nvme_metadata.h"
#include "tiers/nvme_ring.h"
#include "tiers/nvme_verify_pool.h"
#include "tiers/slot_file.h"

namespace kvtier {
namespace {

// Failed admission probes (one per admission_probe_interval_ms while the disk is full) are logged
// at most this often.
constexpr auto kProbeLogInterval = std::chrono::seconds(30);

}  // namespace

NvmeTier::NvmeTier(const NvmeTierOptions& options)
    : options_(options),
      num_dirs_(static_cast<uint32_t>(options.directories.size())),
      total_slots_(options.SlotsPerDirectory() * num_dirs_),
      pending_(num_dirs_) {}

NvmeTier::~NvmeTier() {
  rings_.clear();  // drains in-flight I/O and its commits while metadata and files still exist
  verify_pool_.reset();  // then the verifications those reads handed over
}

absl::StatusOr<std::unique_ptr<NvmeTier>> NvmeTier::Open(const NvmeTierOptions& options,
                                                         const T2RecoveryVisitor& visitor) {
  KVTIER_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<NvmeTier> tier(new NvmeTier(options));
  absl::Status status = tier->OpenFilesAndMetadata();
  if (status.ok()) status = tier->Recover(visitor);
  if (status.ok()) status = tier->StartRings();
  if (status.ok()) return tier;
  // What this failed start created goes again, so that the next start finds the directories as
  // they were; files that were there before (and may hold blocks) stay.
  const std::vector<std::string> created = tier->created_;
  tier.reset();  // closes the files and RocksDB first
  for (const std::string& path : created) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    KVTIER_LOG(kInfo, "t2", "start failed: removed {}, created by it{}", path,
               ec ? fmt::format(" (failed: {})", ec.message()) : "");
  }
  return status;
}

absl::Status NvmeTier::OpenFilesAndMetadata() {
  const uint64_t file_bytes = uint64_t{options_.SlotsPerDirectory()} * options_.slot_bytes;
  for (uint32_t d = 0; d < num_dirs_; ++d) {
    KVTIER_ASSIGN_OR_RETURN(
        auto file, SlotFile::Open(options_.directories[d], file_bytes, options_.preallocate,
                                  fmt::format("t2.directories[{}]", d)));
    if (file->created()) created_.push_back(file->path());
    files_.push_back(std::move(file));
  }
  const SlotLayout layout{options_.slot_bytes, num_dirs_, options_.SlotsPerDirectory()};
  if (!std::filesystem::exists(options_.MetadataDirectory())) {
    created_.push_back(options_.MetadataDirectory());
  }
  KVTIER_ASSIGN_OR_RETURN(
      metadata_, NvmeMetadata::Open(options_.MetadataDirectory(),
                                    options_.durability == T2Durability::kFdatasync, layout));
  return absl::OkStatus();
}

void NvmeTier::AdoptRecord(const StoredRecord& r, std::vector<StoredRecord>* stale) {
  if (r.slot >= total_slots_ || r.record.payload_bytes == 0 ||
      r.record.payload_bytes > options_.slot_bytes) {
    stale->push_back(r);  // from another layout or damaged: useless, and never trusted
    return;
  }
  Slot& s = slots_[r.slot];
  if (s.state == SlotState::kStored) {
    // Two records for one slot happen only after a failed delete: the newer write owns the bytes.
    if (s.epoch > r.epoch) {
      stale->push_back(r);
      return;
    }
    stale->push_back(StoredRecord{s.record, r.slot, s.epoch});
  }
  s.record = r.record;
  s.epoch = r.epoch;
  s.state = SlotState::kStored;
}

absl::Status NvmeTier::Recover(const T2RecoveryVisitor& visitor) {
  const auto start = std::chrono::steady_clock::now();
  slots_.assign(total_slots_, Slot{});
  uint64_t malformed = 0, max_epoch = 0;
  std::vector<StoredRecord> stale;
  KVTIER_RETURN_IF_ERROR(metadata_->Scan(
      [&](const StoredRecord& r) {
        max_epoch = std::max(max_epoch, r.epoch);
        AdoptRecord(r, &stale);
      },
      &malformed));
  for (const StoredRecord& r : stale) {
    KVTIER_LOG(kWarn, "t2", "dropping stale record of key {} in slot {}", r.record.key.ToHex(),
               r.slot);
    (void)metadata_->Delete(r.record.key, r.slot);
  }
  next_epoch_ = max_epoch + 1;
  free_.reserve(total_slots_);
  for (SlotId s = total_slots_; s-- > 0;) {
    if (slots_[s].state == SlotState::kFree) {
      free_.push_back(s);
    } else {
      ++used_;
      if (visitor) visitor(slots_[s].record, s);
    }
  }
  recovered_blocks_ = used_;
  recovery_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  KVTIER_LOG(kInfo, "t2", "warm restart: {} blocks in {:.3f} s ({:.2f} M blocks/s), {} dropped",
             used_, recovery_seconds_, used_ / std::max(recovery_seconds_, 1e-9) / 1e6,
             stale.size() + malformed);
  return absl::OkStatus();
}

absl::Status NvmeTier::StartRings() {
  verify_pool_ = std::make_unique<VerifyPool>(options_.VerifyThreads());
  FixedBufferOptions fixed;
  for (const RegisteredRange& r : options_.registered_ranges) {
    fixed.ranges.push_back(iovec{r.base, r.bytes});
  }
  fixed.align = options_.slot_bytes;  // T1's slot size too: no slot straddles two fixed buffers
  for (uint32_t d = 0; d < num_dirs_; ++d) {
    KVTIER_ASSIGN_OR_RETURN(auto ring, NvmeRing::Create(
                                           files_[d]->fd(), options_.queue_depth, fixed,
                                           [this, d] { CommitBatch(d); }, files_[d]->path()));
    rings_.push_back(std::move(ring));
  }
  return absl::OkStatus();
}

absl::StatusOr<SlotId> NvmeTier::Allocate() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!admitting_) {
    lock.unlock();  // a probe does I/O: never under mu_
    MaybeProbeAdmission();
    lock.lock();
  }
  if (!admitting_) {
    ++rejected_;
    return absl::UnavailableError("t2 is not admitting (disk full or failed metadata write)");
  }
  if (free_.empty()) {
    ++rejected_;
    return absl::ResourceExhaustedError("t2 is full");
  }
  const SlotId slot = free_.back();
  free_.pop_back();
  slots_[slot].state = SlotState::kAllocated;
  ++used_;
  return slot;
}

void NvmeTier::Free(SlotId slot) {
  BlockRecord record;
  bool stored = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (slot >= total_slots_ || slots_[slot].state == SlotState::kFree) {
      KVTIER_LOG(kError, "t2", "Free of slot {} that is not allocated; ignored", slot);
      return;
    }
    stored = slots_[slot].state == SlotState::kStored;
    record = slots_[slot].record;
  }
  if (stored) {
    const absl::Status s = metadata_->Delete(record.key, slot);
    if (!s.ok()) {
      ++metadata_failures_;
      Retire(slot,
             fmt::format("deleting the record of key {}: {}", record.key.ToHex(), s.ToString()));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  slots_[slot].state = SlotState::kFree;
  --used_;
  if (!slots_[slot].retired) free_.push_back(slot);
}

void NvmeTier::StopAdmitting(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!admitting_) return;
  KVTIER_LOG(kError, "t2", "stopped admitting: {}; probing for room at most every {} ms", why,
             options_.admission_probe_interval_ms);
  admitting_ = false;
  ++admission_stops_;
  last_probe_ = std::chrono::steady_clock::now();
}

void NvmeTier::Retire(SlotId slot, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slots_[slot].retired) return;
  KVTIER_LOG(kError, "t2", "retiring slot {}: {}", slot, why);
  slots_[slot].retired = true;
  ++retired_;
}

void NvmeTier::MaybeProbeAdmission() {
  SlotId candidate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (admitting_ || probing_ || free_.empty() ||
        now - last_probe_ < std::chrono::milliseconds(options_.admission_probe_interval_ms)) {
      return;
    }
    probing_ = true;
    last_probe_ = now;
    ++admission_probes_;
    candidate = free_.back();  // the slot the next Allocate hands out, unless a Free comes first
  }
  const absl::Status status = ProbeRoom(candidate);
  std::lock_guard<std::mutex> lock(mu_);
  probing_ = false;
  if (!status.ok()) {
    ++failed_probes_unlogged_;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_probe_log_ >= kProbeLogInterval) {
      KVTIER_LOG(kWarn, "t2", "still not admitting: {} failed probes, the last of slot {}: {}",
                 failed_probes_unlogged_, candidate, status.ToString());
      last_probe_log_ = now;
      failed_probes_unlogged_ = 0;
    }
    return;
  }
  failed_probes_unlogged_ = 0;
  admitting_ = true;
  ++admission_resumes_;
  KVTIER_LOG(kInfo, "t2", "admitting again: slot {}'s range reserved and a metadata put succeeded",
             candidate);
}

absl::Status NvmeTier::ProbeRoom(SlotId slot) {
  // The slot is free, so no I/O touches its range while we reserve it.
  KVTIER_RETURN_IF_ERROR(files_[DirOf(slot)]->Reserve(OffsetOf(slot), options_.slot_bytes));
  return metadata_->Probe();
}

TierStats NvmeTier::Stats() const {
  TierStats st;
  st.slot_bytes = options_.slot_bytes;
  st.capacity_slots = total_slots_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    st.used_slots = used_;
    st.admitting = admitting_;
    st.retired_slots = retired_;
    st.admission_stops = admission_stops_;
    st.admission_probes = admission_probes_;
    st.admission_resumes = admission_resumes_;
  }
  io_.Fill(st);
  st.checksum_failures = checksum_failures_;
  st.rejected_allocations = rejected_;
  st.metadata_failures = metadata_failures_;
  return st;
}

T2FixedBuffers NvmeTier::fixed_buffers() const {
  T2FixedBuffers out;
  for (const std::unique_ptr<NvmeRing>& ring : rings_) {
    out.bytes += ring->fixed_bytes();
    out.registered_bytes += ring->registered_bytes();
    out.fixed_ops += ring->fixed_ops();
    out.plain_ops += ring->plain_ops();
    out.sparse = out.sparse || ring->sparse();
  }
  return out;
}

std::pair<std::string, uint64_t> NvmeTier::SlotLocation(SlotId slot) const {
  return {files_[DirOf(slot)]->path(), OffsetOf(slot)};
}

}  // namespace kvtier
