// Service's working slots (protocol v3; service.h): unkeyed slots of T0 or T1 a session fills
// before it knows their keys, then publishes under a key (the block is then cached and leased to
// the session) or frees. Each session holds at most ServiceOptions::max_working_slots, so one
// engine cannot take a whole tier from the cache and the other clients.
#include <fmt/format.h>

#include <algorithm>

#include "common/checksum.h"
#include "daemon/metrics.h"
#include "daemon/service.h"

namespace kvtier {
namespace {

using protocol::BlockCode;

// Index into Session::working_ of a tier clients write (T0 or T1; callers check it).
size_t WorkIndex(Tier tier) { return tier == Tier::kT0 ? 0 : 1; }

}  // namespace

size_t Session::working_slots() const {
  absl::MutexLock lock(&mu_);
  return working_[0].size() + working_[1].size();
}

bool Service::HoldLease(Session& session, const BlockKey& key) {
  absl::MutexLock lock(&session.mu_);
  if (session.closed_) return false;
  ++session.leases_[key];
  leases_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->AddLeases(1);
  return true;
}

std::vector<SlotResult> Service::WorkTake(Session& session, Tier tier, uint32_t count) {
  std::vector<SlotResult> out(count);
  const uint32_t slot_bytes = tier == Tier::kT0 && tiers_.t0() != nullptr
                                  ? tiers_.t0()->slot_bytes()
                                  : tiers_.t1().slot_bytes();
  size_t room = 0;  // under the quota now
  {
    absl::MutexLock lock(&session.mu_);
    if (session.closed_) {
      for (SlotResult& r : out) r.code = BlockCode::kMissing;
      return out;
    }
    const size_t held = session.working_[0].size() + session.working_[1].size();
    room = held < options_.max_working_slots ? options_.max_working_slots - held : 0;
  }
  // All at once, outside the session's lock (it may shed clean blocks): one hold of the mover's
  // lock for the victims instead of two per slot. Two takes of one session racing may each pass
  // the check above: the quota is checked again as the slots are recorded.
  const size_t want = std::min<size_t>(count, room);
  TierManager::Allocation got = tiers_.AllocateManyForPut(tier, want);
  size_t kept = 0, over = 0;
  {
    absl::MutexLock lock(&session.mu_);
    for (SlotId slot : got.slots) {
      const size_t held = session.working_[0].size() + session.working_[1].size();
      if (!session.closed_ && held < options_.max_working_slots &&
          session.working_[WorkIndex(tier)].insert(slot).second) {
        out[kept++] = SlotResult{BlockCode::kOk, slot, slot_bytes};
      } else {
        (void)tiers_.AbortPut(slot, tier);
        ++over;
      }
    }
  }
  const BlockCode short_code = got.status.code() == absl::StatusCode::kResourceExhausted
                                   ? BlockCode::kRetryLater
                                   : BlockCode::kFailed;
  // After the kept slots: those the quota refused as they were recorded, those the tier could not
  // give now, and those past the quota from the start.
  const size_t got_n = got.slots.size();
  for (size_t i = kept; i < out.size(); ++i) {
    out[i].code = i >= got_n && i < want ? short_code : BlockCode::kOverQuota;
  }
  const size_t over_quota = over + (count - want);
  work_over_quota_.fetch_add(over_quota, std::memory_order_relaxed);
  working_slots_.fetch_add(kept, std::memory_order_relaxed);
  work_taken_.fetch_add(kept, std::memory_order_relaxed);
  if (metrics_ != nullptr) {
    if (over_quota > 0) metrics_->OnWorkingSlots(WorkOp::kOverQuota, over_quota);
    if (kept > 0) metrics_->OnWorkingSlots(WorkOp::kTake, kept);
  }
  return out;
}

SlotResult Service::PublishOne(Session& session, Tier tier, const protocol::WorkPublishItem& item) {
  const uint32_t slot_bytes = tier == Tier::kT0 && tiers_.t0() != nullptr
                                  ? tiers_.t0()->slot_bytes()
                                  : tiers_.t1().slot_bytes();
  if (item.payload_bytes == 0 || item.payload_bytes > slot_bytes) {
    return SlotResult{BlockCode::kFailed};
  }
  const size_t w = WorkIndex(tier);
  {
    // Out of the session while it is published, so a concurrent free or publish of the same
    // slot finds nothing (kMissing) instead of racing this one.
    absl::MutexLock lock(&session.mu_);
    if (session.closed_ || session.working_[w].erase(item.slot) == 0) {
      return SlotResult{BlockCode::kMissing};
    }
  }
  auto keep = [&](BlockCode code) {
    absl::MutexLock lock(&session.mu_);
    if (!session.closed_) {
      session.working_[w].insert(item.slot);
      return SlotResult{code};
    }
    // The session closed meanwhile: its other working slots were freed; this one is freed here.
    (void)tiers_.AbortPut(item.slot, tier);
    working_slots_.fetch_sub(1, std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->OnWorkingSlots(WorkOp::kFree, 1);
    return SlotResult{BlockCode::kMissing};
  };
  if (options_.verify_puts && tier == Tier::kT1 &&
      PayloadChecksum(tiers_.t1().SlotData(item.slot), item.payload_bytes) != item.checksum) {
    return keep(BlockCode::kBadChecksum);
  }
  const BlockKey key = scope_.Scope(session.root_, item.key);
  std::optional<BlockKey> parent;
  if (item.parent) parent = scope_.Scope(session.root_, *item.parent);
  kvtier::PutCommit commit{key, session.namespace_id(), item.payload_bytes, item.checksum,
                           parent ? &*parent : nullptr};
  commit.tier = tier;
  commit.working = true;
  absl::StatusOr<CommitOutcome> outcome = tiers_.CommitPut(commit, item.slot);
  if (!outcome.ok()) {
    return keep(outcome.status().code() == absl::StatusCode::kResourceExhausted
                    ? BlockCode::kRetryLater
                    : BlockCode::kFailed);
  }
  if (*outcome == CommitOutcome::kAlreadyPresent) return keep(BlockCode::kAlreadyPresent);
  // Published: the slot is the block's copy now, leased to the session by CommitPut.
  working_slots_.fetch_sub(1, std::memory_order_relaxed);
  work_published_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->OnWorkingSlots(WorkOp::kPublish, 1);
  if (!HoldLease(session, key)) {
    (void)tiers_.Release(key);  // closed meanwhile: the block stays cached, unleased
    return SlotResult{BlockCode::kMissing};
  }
  if (metrics_ != nullptr) {
    metrics_->AddCopiedBytes(
        tier == Tier::kT0 ? CopyDirection::kClientToT0 : CopyDirection::kClientToT1,
        item.payload_bytes);
  }
  return SlotResult{BlockCode::kOk, item.slot, item.payload_bytes};
}

std::vector<SlotResult> Service::WorkPublish(Session& session, Tier tier,
                                             absl::Span<const protocol::WorkPublishItem> items) {
  std::vector<SlotResult> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) out[i] = PublishOne(session, tier, items[i]);
  return out;
}

std::vector<BlockCode> Service::WorkFree(Session& session, Tier tier,
                                         absl::Span<const uint32_t> slots) {
  std::vector<BlockCode> out(slots.size(), BlockCode::kMissing);
  for (size_t i = 0; i < slots.size(); ++i) {
    {
      absl::MutexLock lock(&session.mu_);
      if (session.closed_ || session.working_[WorkIndex(tier)].erase(slots[i]) == 0) continue;
    }
    (void)tiers_.AbortPut(slots[i], tier);
    working_slots_.fetch_sub(1, std::memory_order_relaxed);
    work_freed_.fetch_add(1, std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->OnWorkingSlots(WorkOp::kFree, 1);
    out[i] = BlockCode::kOk;
  }
  return out;
}

}  // namespace kvtier
