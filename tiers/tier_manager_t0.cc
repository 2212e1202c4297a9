// The tier manager's T0 paths: Gets that target T0 (T1 -> T0 by DMA, one transfer per block however
// many Gets wait for it), and T0's eviction (a victim that still has its T1 copy just leaves; one
// without is copied T0 -> T1 first). Contracts in tier_manager.h; invariants and lock order in
// tier_manager_state.h.
#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "common/log.h"
#include "tiers/tier_manager_state.h"

namespace kvtier::internal {
namespace {

constexpr int kT0 = static_cast<int>(Tier::kT0);
constexpr int kT1 = static_cast<int>(Tier::kT1);

}  // namespace

void TierManagerState::LoadIntoT0(const BlockInfo& info, GetDone done) {
  if (info.InTier(Tier::kT0)) {  // the lease pins the T0 copy from here on
    {
      std::lock_guard lock(mu_);
      if (info.id < resident_.size() && (resident_[info.id] & TierBit(Tier::kT0)) != 0) {
        Policies(Tier::kT0).eviction->Touch(info.id);
      }
    }
    counters_.gets_t0.fetch_add(1, std::memory_order_relaxed);
    done(LeasedBlock{info.slots[kT0], info.payload_bytes, Tier::kT0});
    return;
  }
  if (info.InTier(Tier::kT1)) {
    StartT0Promotion(info, std::move(done));
    return;
  }
  // Only in T2 (or in no tier): into T1 first under this Get's lease, then on into T0. Counted in
  // t0_chains_ until the T0 step is under way, so Quiesce and Drain never see a gap between the
  // two transfers.
  {
    std::lock_guard lock(mu_);
    ++t0_chains_;
  }
  LoadIntoT1(info, [this, key = info.key,
                    done = std::move(done)](absl::StatusOr<LeasedBlock> in_t1) mutable {
    ContinueIntoT0(key, std::move(in_t1), std::move(done));
    std::lock_guard lock(mu_);
    --t0_chains_;
    cv_.notify_all();
  });
}

void TierManagerState::ContinueIntoT0(const BlockKey& key, absl::StatusOr<LeasedBlock> in_t1,
                                      GetDone done) {
  if (!in_t1.ok()) {
    done(in_t1.status());  // the T1 path gave the lease back
    return;
  }
  std::optional<BlockInfo> now = index_.Find(key);  // present: the lease holds it
  if (!now) {
    done(absl::InternalError(fmt::format("block {} left the index while leased", key.ToHex())));
    return;
  }
  StartT0Promotion(*now, std::move(done));  // serves a T0 copy made meanwhile as it is
}

void TierManagerState::StartT0Promotion(const BlockInfo& info, GetDone done) {
  const BlockKey key = info.key;
  std::optional<absl::StatusOr<LeasedBlock>> answer;  // set: `done` gets it now, no copy
  SlotId t1_slot = kNoSlot;
  {
    std::lock_guard lock(mu_);
    // A copy that completed since this Get's lease was taken is in the index now (its completion
    // records it and leaves t0_promotions_ under one hold of mu_): use it, never copy twice.
    std::optional<BlockInfo> now = index_.Find(key);
    if (now && now->InTier(Tier::kT0)) {
      answer = LeasedBlock{now->slots[kT0], now->payload_bytes, Tier::kT0};
    } else if (!now || !now->InTier(Tier::kT1)) {  // cannot happen: the lease pins the T1 copy
      answer =
          absl::InternalError(fmt::format("block {} lost its T1 copy while leased", key.ToHex()));
    } else {
      auto [it, first] = t0_promotions_.try_emplace(key);
      it->second.waiters.push_back(std::move(done));
      if (!first) return;  // a copy of this block is already on its way into T0
      it->second.payload_bytes = now->payload_bytes;
      t1_slot = now->slots[kT1];
    }
  }
  if (answer) {
    if (answer->ok()) {
      counters_.gets_t0.fetch_add(1, std::memory_order_relaxed);
    } else {
      (void)Release(key);
    }
    done(std::move(*answer));
    return;
  }
  absl::StatusOr<SlotId> t0_slot = AllocateT0();
  if (!t0_slot.ok()) {
    OnPromotedToT0(key, kNoSlot, t0_slot.status());
    return;
  }
  // The first waiter's lease pins the T1 source until the copy's completion.
  const BlockRecord record{key, 0, info.payload_bytes, 0};
  const SlotId slot = *t0_slot;
  t0_->Write(slot, record, t1_.SlotData(t1_slot),
             [this, key, slot, started = std::chrono::steady_clock::now()](absl::Status s) {
               ReportMove({MoveKind::kPromotion, Tier::kT1, Tier::kT0}, started, s);
               OnPromotedToT0(key, slot, std::move(s));
             });
}

void TierManagerState::OnPromotedToT0(const BlockKey& key, SlotId t0_slot, absl::Status status) {
  std::vector<GetDone> waiters;
  LeasedBlock block{t0_slot, 0, Tier::kT0};
  bool keep_slot = false;
  {
    std::lock_guard lock(mu_);
    auto it = t0_promotions_.find(key);
    waiters = std::move(it->second.waiters);
    block.payload_bytes = it->second.payload_bytes;
    t0_promotions_.erase(it);
    std::optional<BlockInfo> info = index_.Find(key);  // present: the waiters hold leases
    if (!info && status.ok()) status = absl::InternalError("promoted block left the index");
    if (status.ok()) {
      keep_slot = index_.SetTier(key, Tier::kT0, t0_slot).ok();
      if (keep_slot) {
        AddResident(Tier::kT0, info->id, key.lo, info->parent);
      } else if (info->InTier(Tier::kT0)) {
        block.slot = info->slots[kT0];
      } else {
        status = absl::InternalError("T0 copy could not be recorded");
      }
    }
    cv_.notify_all();
  }
  if (!keep_slot && t0_slot != kNoSlot) t0_->Free(t0_slot);
  if (!status.ok()) {
    counters_.t0_promotion_failures.fetch_add(1, std::memory_order_relaxed);
    if (status.code() != absl::StatusCode::kResourceExhausted) {  // full: a normal outcome
      KVTIER_LOG(kWarn, "tiers", "promotion of block {} to T0 failed: {}", key.ToHex(),
                 std::string(status.message()));
    }
    FailWaiters(key, std::move(waiters), status);
    return;
  }
  counters_.gets_promoted_t0.fetch_add(waiters.size(), std::memory_order_relaxed);
  KickIfAboveHigh(Tier::kT0);
  for (GetDone& done : waiters) done(block);
}

absl::StatusOr<SlotId> TierManagerState::AllocateT0() {
  absl::StatusOr<SlotId> slot = t0_->Allocate();
  if (slot.ok()) {
    KickIfAboveHigh(Tier::kT0);
    return slot;
  }
  if (slot.status().code() != absl::StatusCode::kResourceExhausted) return slot;
  bool freed = false;
  {
    std::lock_guard lock(mu_);
    Policies(Tier::kT0).draining = true;  // a full tier is above any watermark
    work_pending_ = true;
    cv_.notify_all();
    // Make room now if a block can leave without a copy (its T1 copy is still there).
    if (std::optional<BlockId> victim = PickVictim(Tier::kT0, /*only_without_io=*/true)) {
      std::optional<BlockInfo> info = index_.FindById(*victim);
      RemoveResident(Tier::kT0, *victim, /*chosen_by_policy=*/true);
      counters_.t0_evictions.fetch_add(1, std::memory_order_relaxed);
      if (info) {
        counters_.t0_clean_evictions.fetch_add(1, std::memory_order_relaxed);
        freed = LeaveT0Locked(*info);
      }
    }
  }
  if (freed) slot = t0_->Allocate();
  if (slot.ok()) return slot;
  return absl::ResourceExhaustedError(
      "T0 is full: every block is leased or on its way to T1; retry shortly");
}

bool TierManagerState::LeaveT0Locked(const BlockInfo& info) {
  absl::StatusOr<uint32_t> slot = index_.ClearTier(info.key, Tier::kT0);
  if (!slot.ok()) {
    // A lease pinned it after it was chosen: it stays, back in the policy as a fresh insert.
    std::optional<BlockInfo> now = index_.Find(info.key);
    if (now && now->InTier(Tier::kT0)) AddResident(Tier::kT0, now->id, info.key.lo, now->parent);
    return false;
  }
  t0_->Free(*slot);
  EraseIfUnusedLocked(info.key);
  return true;
}

bool TierManagerState::EvictT0Once() {
  std::optional<BlockInfo> demote;
  {
    std::lock_guard lock(mu_);
    if (t0_demotions_.size() >= options_.max_demotions_in_flight) return false;
    std::optional<BlockId> victim = PickVictim(Tier::kT0, /*only_without_io=*/false);
    if (!victim) return false;
    std::optional<BlockInfo> info = index_.FindById(*victim);
    RemoveResident(Tier::kT0, *victim, /*chosen_by_policy=*/true);
    counters_.t0_evictions.fetch_add(1, std::memory_order_relaxed);
    if (!info) return true;
    if (info->InTier(Tier::kT1)) {  // clean: promotion kept the T1 copy, nothing to copy
      counters_.t0_clean_evictions.fetch_add(1, std::memory_order_relaxed);
      LeaveT0Locked(*info);
      return true;
    }
    t0_demotions_[info->key] = T0Demotion{info->slots[kT0], kNoSlot, false};
    demote = std::move(info);
  }
  return StartT0Demotion(*demote);
}

bool TierManagerState::StartT0Demotion(const BlockInfo& info) {
  // A free T1 slot or none: no kick when T1 is full (the evictor is this thread, and T1 above its
  // watermark drains anyway), so a T0 victim waiting for T1 room does not spin the evictor.
  absl::StatusOr<SlotId> t1_slot = t1_.Allocate();
  SlotId t0_slot = kNoSlot;
  {
    std::lock_guard lock(mu_);
    auto it = t0_demotions_.find(info.key);
    const T0Demotion d = it->second;
    if (t1_slot.ok() && !d.dropped) {
      it->second.t1_slot = *t1_slot;
      t0_slot = d.t0_slot;
    } else {
      t0_demotions_.erase(it);
      cv_.notify_all();
      if (t1_slot.ok()) t1_.Free(*t1_slot);
      if (d.dropped) {
        t0_->Free(d.t0_slot);
        return true;
      }
      std::optional<BlockInfo> now = index_.Find(info.key);
      if (!now) return true;
      if (now->InTier(Tier::kT1) || now->InTier(Tier::kT2)) {  // a lower copy exists: just go
        counters_.t0_clean_evictions.fetch_add(1, std::memory_order_relaxed);
        LeaveT0Locked(*now);
        return true;
      }
      // T1 has no room now (its victims are on their way to T2): the block waits in T0, back in
      // its policy, and the evictor comes back to T0 when woken or at its next poll. No progress.
      if (now->InTier(Tier::kT0)) AddResident(Tier::kT0, now->id, info.key.lo, now->parent);
      return false;
    }
  }
  KickIfAboveHigh(Tier::kT1);
  const BlockKey key = info.key;
  t0_->Read(t0_slot, t1_.SlotData(*t1_slot),
            [this, key, started = std::chrono::steady_clock::now()](absl::Status s) {
              ReportMove({MoveKind::kDemotion, Tier::kT0, Tier::kT1}, started, s);
              OnT0Demoted(key, s);
            });
  return true;
}

void TierManagerState::OnT0Demoted(const BlockKey& key, const absl::Status& status) {
  if (!status.ok()) {
    counters_.t0_demotion_failures.fetch_add(1, std::memory_order_relaxed);
    KVTIER_LOG(kWarn, "tiers", "demotion of block {} from T0 to T1 failed, T0 copy dropped: {}",
               key.ToHex(), std::string(status.message()));
  }
  bool entered_t1 = false;
  {
    std::lock_guard lock(mu_);
    auto it = t0_demotions_.find(key);
    const T0Demotion d = it->second;
    t0_demotions_.erase(it);
    work_pending_ = true;
    cv_.notify_all();
    std::optional<BlockInfo> info = d.dropped ? std::nullopt : index_.Find(key);
    if (!info) {  // dropped meanwhile: both slots are ours to free
      t1_.Free(d.t1_slot);
      t0_->Free(d.t0_slot);
      return;
    }
    // SetTier fails when a T1 Get copied the block up from T0 meanwhile: that copy stays.
    entered_t1 = status.ok() && index_.SetTier(key, Tier::kT1, d.t1_slot).ok();
    if (entered_t1) {
      AddResident(Tier::kT1, info->id, key.lo, info->parent);
      counters_.t0_demotions.fetch_add(1, std::memory_order_relaxed);
    } else {
      t1_.Free(d.t1_slot);
    }
    LeaveT0Locked(*info);  // stays (now clean) if leased meanwhile
  }
  if (entered_t1) KickIfAboveHigh(Tier::kT1);
}

}  // namespace kvtier::internal
