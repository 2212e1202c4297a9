#include "tiers/tier_manager.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "common/log.h"
#include "tiers/mover.h"

namespace kvtier {
namespace {

// How often an idle evictor looks at the watermarks without being woken (a safety net: every
// operation that fills a tier past its high watermark wakes it).
constexpr int kEvictorPollMs = 100;
// T2 writes whole 4 KiB blocks (O_DIRECT).
constexpr uint32_t kT2WriteAlign = 4096;

uint64_t T2Slots(const TierManagerOptions& options) {
  if (!options.t2) return 0;
  return uint64_t{options.t2->SlotsPerDirectory()} * options.t2->directories.size();
}

}  // namespace

TierManager::TierManager(const TierManagerOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<TierManager>> TierManager::Create(
    const TierManagerOptions& options) {
  KVTIER_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<TierManager> manager(new TierManager(options));
  KVTIER_RETURN_IF_ERROR(manager->Start());
  return manager;
}

absl::Status TierManager::Start() {
  BlockIndexOptions index_options = options_.index;
  if (index_options.max_entries == 0) {
    // Every block has a copy in some slot, plus blocks in no tier waiting for their last lease.
    const uint64_t t1_slots = options_.t1.capacity_bytes / options_.t1.slot_bytes;
    index_options.max_entries = t1_slots + T2Slots(options_) + 4096;
  }
  KVTIER_ASSIGN_OR_RETURN(t1_, HostTier::Create(options_.t1));
  if (options_.t0) {
    KVTIER_ASSIGN_OR_RETURN(t0_, DeviceTier::Create(*options_.t0));
  }
  // T0's size is known only now (it may be a fraction of the device's free memory).
  if (options_.index.max_entries == 0 && t0_) index_options.max_entries += t0_->capacity_slots();
  if (options_.index.max_entries == 0 && options_.t3) {
    index_options.max_entries += options_.t3->capacity_slots();
  }
  KVTIER_ASSIGN_OR_RETURN(index_, BlockIndex::Create(index_options));
  std::vector<internal::MoverRung> rungs(kNumTiers);
  rungs[TierIndex(Tier::kT0)].storage = t0_.get();
  rungs[TierIndex(Tier::kT0)].client_readable = true;
  rungs[TierIndex(Tier::kT1)] = internal::MoverRung{t1_.get(), t1_.get(), false, 0, 0, true};
  internal::MoverRung t2_rung{nullptr, nullptr, options_.t2.has_value(), kT2WriteAlign,
                              T2Slots(options_)};
  rungs[TierIndex(Tier::kT2)] = t2_rung;
  if (SharedTier* t3 = options_.t3.get()) {
    // Persistent: its payloads are checked before they leave, frees are deferred, and a copy
    // that fails its read is gone. Reads climb straight into T1.
    internal::MoverRung& r = rungs[TierIndex(Tier::kT3)];
    r = internal::MoverRung{t3, nullptr, true, 0, t3->capacity_slots(), false};
    r.climb_to = TierIndex(Tier::kT1);
    r.shared = t3;
  }
  state_ = std::make_unique<internal::Mover>(options_, *index_, std::move(rungs), Tier::kT1);
  KVTIER_RETURN_IF_ERROR(state_->Init());
  if (options_.t2) {
    NvmeTierOptions t2_options = *options_.t2;
    t2_options.registered_ranges = {RegisteredRange{t1_->base(), t1_->size()}};
    internal::Mover* state = state_.get();
    KVTIER_ASSIGN_OR_RETURN(
        t2_, NvmeTier::Open(t2_options, [state](const BlockRecord& record, SlotId slot) {
          state->AdoptRecovered(record, slot);
        }));
    t2_rung.storage = t2_.get();
  }
  state_->AttachPersistent(Tier::kT2, t2_rung);
  KVTIER_LOG(
      kInfo, "tiers",
      "tier manager up: T0 {} slots, T1 {} slots, T2 {} slots, T3 {}, {} blocks recovered",
      t0_ ? t0_->capacity_slots() : 0, t1_->capacity_slots(), t2_ ? t2_->capacity_slots() : 0,
      options_.t3 ? fmt::format("{} blocks remembered", options_.t3->capacity_slots()) : "off",
      state_->Stats().recovered_blocks);
  evictor_ = std::thread([this] { EvictorLoop(); });
  return absl::OkStatus();
}

TierManager::~TierManager() {
  if (state_) {
    state_->Stop();
    if (evictor_.joinable()) evictor_.join();
    state_->Drain();  // moves in flight finish; dropped blocks' T2 records are deleted
    // T3's workers may still be returning from a completion into the mover (t2_.reset() below
    // waits for T2's the same way).
    if (options_.t3) options_.t3->WaitIdle();
  }
  t2_.reset();  // waits for its I/O; no callback into state_ is left
  t0_.reset();  // likewise for its copies
  state_.reset();
  t1_.reset();
  index_.reset();
}

void TierManager::EvictorLoop() {
  while (!state_->stopped()) {
    if (!state_->EvictStep()) state_->WaitForWork(kEvictorPollMs);
  }
}

absl::StatusOr<SlotId> TierManager::AllocateForPut(Tier tier) {
  return state_->AllocateForPut(tier);
}

TierManager::Allocation TierManager::AllocateManyForPut(Tier tier, size_t count) {
  Allocation out;
  out.status = state_->AllocateManyForPut(tier, count, out.slots);
  return out;
}

absl::Status TierManager::AbortPut(SlotId slot, Tier tier) { return state_->AbortPut(tier, slot); }

absl::StatusOr<CommitOutcome> TierManager::CommitPut(const PutCommit& put, SlotId slot) {
  return state_->Commit(put, slot);
}

void TierManager::CountPutAlreadyPresent() { state_->CountPutAlreadyPresent(); }

void TierManager::Get(const BlockKey& key, GetDone done) {
  state_->Get(key, Tier::kT1, std::move(done));
}

void TierManager::Get(const BlockKey& key, Tier target, GetDone done) {
  state_->Get(key, target, std::move(done));
}

size_t TierManager::ExtendPrefix(absl::Span<const BlockKey> keys, size_t n, uint64_t namespace_id,
                                 absl::Span<TierMask> tiers) {
  return state_->ExtendPrefix(keys, n, namespace_id, tiers);
}

void TierManager::FindShared(absl::Span<const BlockKey> keys, uint64_t namespace_id) {
  state_->FindShared(keys, namespace_id);
}

absl::Status TierManager::Release(const BlockKey& key) { return state_->Release(key); }

absl::Status TierManager::Drop(const BlockKey& key) { return state_->Drop(key); }

void TierManager::Quiesce() { state_->Quiesce(); }

bool TierManager::FlushT1(std::chrono::steady_clock::time_point deadline) {
  return state_->Flush(deadline);
}

TierManagerStats TierManager::Stats() const { return state_->Stats(); }

}  // namespace kvtier
