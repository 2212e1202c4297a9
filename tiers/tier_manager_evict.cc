// The tier manager's evictor: watermarks, victims, T1 -> T2 demotion and T2 deletion (T0's
// eviction is in tier_manager_t0.cc).
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <utility>

#include "common/checksum.h"
#include "common/log.h"
#include "tiers/tier_manager_state.h"

namespace kvtier::internal {
namespace {

constexpr int kT1 = static_cast<int>(Tier::kT1);
// How many T2 victims one demotion may evict to find a free T2 slot before giving up.
constexpr int kMaxT2EvictionsPerAllocation = 16;
constexpr uint32_t kDirectIoBlock = 4096;

// T2 writes whole 4 KiB blocks (O_DIRECT), so the bytes of the slot between the payload's end and
// the next 4 KiB boundary reach the disk too. They are whatever the slot held before (another
// block's, maybe another namespace's): zeroed, so nothing but this block's payload is persisted.
// The slot is the block's (committed, so no writer) and readers read only payload_bytes.
void ZeroPadding(std::byte* slot, uint32_t payload_bytes) {
  const uint32_t tail = payload_bytes % kDirectIoBlock;
  if (tail != 0) std::memset(slot + payload_bytes, 0, kDirectIoBlock - tail);
}

}  // namespace

void TierManagerState::Kick() {
  std::lock_guard lock(mu_);
  work_pending_ = true;
  cv_.notify_all();
}

void TierManagerState::KickIfAboveHigh(Tier tier) {
  StorageTier* storage = Storage(tier);
  if (storage == nullptr) return;
  const TierStats s = storage->Stats();
  const double high = Policies(tier).options.high_watermark;  // immutable after Init
  if (static_cast<double>(s.used_slots) > high * static_cast<double>(s.capacity_slots)) Kick();
}

bool TierManagerState::OverWatermark(Tier tier) {
  StorageTier* storage = Storage(tier);
  if (storage == nullptr) return false;
  const TierStats s = storage->Stats();  // outside mu_: T2 takes its own lock
  std::lock_guard lock(mu_);
  TierPolicies& p = Policies(tier);
  uint64_t used = s.used_slots;
  // Slots of demotions in flight are as good as free: they are released when the writes end.
  if (tier == Tier::kT1) used -= std::min<uint64_t>(used, demotions_.size());
  if (tier == Tier::kT0) used -= std::min<uint64_t>(used, t0_demotions_.size());
  if (tier == Tier::kT1 && flushing_.load(std::memory_order_relaxed)) return used > 0;
  const double cap = static_cast<double>(s.capacity_slots);
  if (static_cast<double>(used) > p.options.high_watermark * cap) p.draining = true;
  if (static_cast<double>(used) <= p.options.low_watermark * cap) p.draining = false;
  return p.draining;
}

std::optional<BlockId> TierManagerState::PickVictim(Tier tier, bool only_without_io) {
  TierPolicies& p = Policies(tier);
  const Tier below = tier == Tier::kT0 ? Tier::kT1 : Tier::kT2;
  auto allowed = [&](BlockId id, bool leaves_only) {
    if (leaves_only && !p.leaves.IsLeaf(id)) return false;
    std::optional<BlockInfo> info = index_.FindById(id);
    if (!info || info->leases != 0) return false;
    return !only_without_io || info->InTier(below);
  };
  std::optional<BlockId> victim =
      p.eviction->Evict([&](BlockId id) { return allowed(id, p.options.leaf_first); });
  // Leaf-first must not wedge the tier: with no evictable leaf (reused ids can leave stale child
  // counts; see leaf_tracker.h) any evictable block goes.
  if (!victim && p.options.leaf_first) {
    victim = p.eviction->Evict([&](BlockId id) { return allowed(id, false); });
  }
  return victim;
}

bool TierManagerState::LeaveT1Locked(const BlockInfo& info, bool count_as_dropped) {
  absl::StatusOr<uint32_t> slot = index_.ClearTier(info.key, Tier::kT1);
  if (!slot.ok()) {
    // A lease pinned it after it was chosen: it stays, back in the policy as a fresh insert.
    std::optional<BlockInfo> now = index_.Find(info.key);
    if (now && now->InTier(Tier::kT1)) AddResident(Tier::kT1, now->id, info.key.lo, now->parent);
    return false;
  }
  t1_.Free(*slot);
  if (count_as_dropped) counters_.t1_dropped.fetch_add(1, std::memory_order_relaxed);
  EraseIfUnusedLocked(info.key);
  return true;
}

bool TierManagerState::EvictStep() {
  bool worked = FreeDeferredT2Slots();
  worked |= StartWaitingPromotions();
  if (t2_ != nullptr && OverWatermark(Tier::kT2)) worked |= EvictT2Once();
  if (t0_ != nullptr && OverWatermark(Tier::kT0)) worked |= EvictT0Once();
  if (!OverWatermark(Tier::kT1)) return worked;
  bool room, idle;
  {
    std::lock_guard lock(mu_);
    room = demotions_.size() < options_.max_demotions_in_flight;
    idle = demotions_.empty();
  }
  if (!room) return worked;
  if (EvictT1Once()) return true;
  // Nothing can leave T1 and nothing is on its way out: promotions waiting for room would wait
  // until some client releases a lease. They fail instead; their Gets may retry.
  if (idle) FailWaitingPromotions();
  return worked;
}

bool TierManagerState::EvictT1Once() {
  std::optional<BlockInfo> demote;
  {
    std::lock_guard lock(mu_);
    std::optional<BlockId> victim = PickVictim(Tier::kT1, /*only_without_io=*/false);
    if (!victim) return false;
    std::optional<BlockInfo> info = index_.FindById(*victim);
    RemoveResident(Tier::kT1, *victim, /*chosen_by_policy=*/true);
    counters_.t1_evictions.fetch_add(1, std::memory_order_relaxed);
    if (!info) return true;
    if (info->InTier(Tier::kT2)) {  // clean: the T2 copy is already there, nothing to write
      counters_.t1_clean_evictions.fetch_add(1, std::memory_order_relaxed);
      LeaveT1Locked(*info, /*count_as_dropped=*/false);
      return true;
    }
    const bool admitted = t2_ != nullptr && !demotions_.contains(info->key) &&
                          Policies(Tier::kT2).admission->Admit(info->key.lo);
    if (!admitted) {
      if (t2_ != nullptr) counters_.demotions_rejected.fetch_add(1, std::memory_order_relaxed);
      LeaveT1Locked(*info, /*count_as_dropped=*/true);
      return true;
    }
    demotions_[info->key] =
        Demotion{info->slots[kT1], false, checksum_[info->id], namespace_[info->id]};
    demote = std::move(info);
  }
  StartDemotion(*demote);
  return true;
}

void TierManagerState::StartDemotion(const BlockInfo& info) {
  absl::StatusOr<SlotId> t2_slot = AllocateT2();
  if (!t2_slot.ok()) {
    AbandonDemotion(info.key, /*rejected=*/true);
    return;
  }
  Demotion d;
  {
    std::lock_guard lock(mu_);
    d = demotions_.at(info.key);
  }
  const std::byte* src = t1_.SlotData(d.t1_slot);
  const uint64_t checksum = PayloadChecksum(src, info.payload_bytes);
  if (d.expected_checksum != 0 && checksum != d.expected_checksum) {
    counters_.integrity_drops.fetch_add(1, std::memory_order_relaxed);
    KVTIER_LOG(kError, "tiers",
               "block {}: T1 payload no longer matches the checksum given at commit; dropped, not "
               "written to T2 (a client wrote to a committed slot?)",
               info.key.ToHex());
    t2_->Free(*t2_slot);
    AbandonDemotion(info.key, /*rejected=*/false);
    return;
  }
  ZeroPadding(t1_.SlotData(d.t1_slot), info.payload_bytes);
  const BlockRecord record{info.key, d.namespace_id, info.payload_bytes, checksum};
  const BlockKey key = info.key;
  const SlotId slot = *t2_slot;
  t2_->Write(slot, record, src,
             [this, key, slot, started = std::chrono::steady_clock::now()](absl::Status s) {
               ReportMove({MoveKind::kDemotion, Tier::kT1, Tier::kT2}, started, s);
               OnDemoted(key, slot, s);
             });
}

absl::StatusOr<SlotId> TierManagerState::AllocateT2() {
  absl::StatusOr<SlotId> slot = t2_->Allocate();
  for (int i = 0; i < kMaxT2EvictionsPerAllocation; ++i) {
    if (slot.ok() || slot.status().code() != absl::StatusCode::kResourceExhausted) return slot;
    if (!EvictT2Once()) return slot;
    slot = t2_->Allocate();
  }
  return slot;
}

void TierManagerState::AbandonDemotion(const BlockKey& key, bool rejected) {
  std::lock_guard lock(mu_);
  auto it = demotions_.find(key);
  const Demotion d = it->second;
  demotions_.erase(it);
  cv_.notify_all();
  if (d.dropped) {
    t1_.Free(d.t1_slot);
    return;
  }
  if (rejected) counters_.demotions_rejected.fetch_add(1, std::memory_order_relaxed);
  if (std::optional<BlockInfo> info = index_.Find(key)) {
    LeaveT1Locked(*info, /*count_as_dropped=*/true);
  }
}

void TierManagerState::OnDemoted(const BlockKey& key, SlotId t2_slot, const absl::Status& status) {
  if (!status.ok()) {
    counters_.demotion_failures.fetch_add(1, std::memory_order_relaxed);
    KVTIER_LOG(kWarn, "tiers", "demotion of block {} to T2 failed, block dropped: {}", key.ToHex(),
               std::string(status.message()));
  }
  std::lock_guard lock(mu_);
  auto it = demotions_.find(key);
  const Demotion d = it->second;
  demotions_.erase(it);
  work_pending_ = true;
  cv_.notify_all();
  std::optional<BlockInfo> info = d.dropped ? std::nullopt : index_.Find(key);
  if (!status.ok() || !info) {  // failed, or dropped meanwhile: no T2 copy, and T1's goes too
    deferred_t2_frees_.push_back(t2_slot);
    if (info) {
      LeaveT1Locked(*info, /*count_as_dropped=*/true);
    } else {
      t1_.Free(d.t1_slot);
    }
    return;
  }
  if (!index_.SetTier(key, Tier::kT2, t2_slot).ok()) {  // cannot happen: only we add T2 copies
    deferred_t2_frees_.push_back(t2_slot);
    return;
  }
  AddResident(Tier::kT2, info->id, key.lo, info->parent);
  counters_.demotions.fetch_add(1, std::memory_order_relaxed);
  LeaveT1Locked(*info, /*count_as_dropped=*/false);  // stays (clean) if leased meanwhile
}

bool TierManagerState::EvictT2Once() {
  SlotId slot;
  {
    std::lock_guard lock(mu_);
    std::optional<BlockId> victim = PickVictim(Tier::kT2, /*only_without_io=*/false);
    if (!victim) return false;
    std::optional<BlockInfo> info = index_.FindById(*victim);
    RemoveResident(Tier::kT2, *victim, /*chosen_by_policy=*/true);
    counters_.t2_evictions.fetch_add(1, std::memory_order_relaxed);
    if (!info) return true;
    absl::StatusOr<uint32_t> cleared = index_.ClearTier(info->key, Tier::kT2);
    if (!cleared.ok()) {  // leased meanwhile: it stays
      AddResident(Tier::kT2, info->id, info->key.lo, info->parent);
      return true;
    }
    slot = *cleared;
    EraseIfUnusedLocked(info->key);
  }
  t2_->Free(slot);  // deletes the record (a RocksDB write), so outside mu_
  return true;
}

bool TierManagerState::FreeDeferredT2Slots() {
  std::vector<SlotId> slots;
  {
    std::lock_guard lock(mu_);
    slots.swap(deferred_t2_frees_);
  }
  if (t2_ == nullptr) return false;
  for (SlotId slot : slots) t2_->Free(slot);
  return !slots.empty();
}

void TierManagerState::WaitForWork(int timeout_ms) {
  std::unique_lock lock(mu_);
  if (!work_pending_ && !stop_) {
    evictor_idle_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                 [&] { return work_pending_ || stop_.load(); });
    evictor_idle_ = false;
  }
  work_pending_ = false;
}

void TierManagerState::Stop() {
  std::lock_guard lock(mu_);
  stop_ = true;
  cv_.notify_all();
}

void TierManagerState::Quiesce() {
  Kick();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    return stop_.load() ||
           (evictor_idle_ && !work_pending_ && demotions_.empty() && promotions_.empty() &&
            t0_demotions_.empty() && t0_promotions_.empty() && t0_chains_ == 0 &&
            deferred_t2_frees_.empty());
  });
}

bool TierManagerState::FlushT1(std::chrono::steady_clock::time_point deadline) {
  flushing_ = true;
  Kick();
  bool finished;
  {
    std::unique_lock lock(mu_);
    // Done when the evictor found nothing more it could move (T1 is empty but for leased blocks
    // and open puts) and the last write has settled.
    finished = cv_.wait_until(lock, deadline, [&] {
      return stop_.load() || (evictor_idle_ && !work_pending_ && demotions_.empty());
    });
  }
  flushing_ = false;
  return finished;
}

void TierManagerState::Drain() {
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] {
      return demotions_.empty() && promotions_.empty() && t0_demotions_.empty() &&
             t0_promotions_.empty() && t0_chains_ == 0;
    });
  }
  FreeDeferredT2Slots();
}

}  // namespace kvtier::internal
