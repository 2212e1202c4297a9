// The tier manager's store and load paths: residency bookkeeping, put, get with promotion into T1,
// release, drop, warm-restart adoption. Eviction and demotion are in tier_manager_evict.cc, T0's
// paths in tier_manager_t0.cc.
#include "tiers/tier_manager_state.h"

#include <fmt/format.h>

#include <utility>

#include "common/log.h"

namespace kvtier::internal {
namespace {

std::optional<BlockId> ParentOf(BlockId parent) {
  return parent == kNoBlock ? std::nullopt : std::optional<BlockId>(parent);
}

}  // namespace

TierManagerState::TierManagerState(const TierManagerOptions& options, BlockIndex& index,
                                   HostTier& t1, DeviceTier* t0)
    : options_(options), index_(index), t1_(t1), t0_(t0) {}

StorageTier* TierManagerState::Storage(Tier tier) const {
  switch (tier) {
    case Tier::kT0:
      return t0_;
    case Tier::kT1:
      return &t1_;
    default:
      return t2_;
  }
}

absl::Status TierManagerState::Init(uint64_t t2_slots) {
  const uint64_t t0_slots = t0_ != nullptr ? t0_->capacity_slots() : 0;
  const std::array<std::pair<const TierPolicyOptions*, uint64_t>, kNumTiers> tiers = {
      {{&options_.t0_policy, t0_slots},
       {&options_.t1_policy, t1_.capacity_slots()},
       {&options_.t2_policy, t2_slots}}};
  for (size_t i = 0; i < tiers.size(); ++i) {
    TierPolicies& p = policies_[i];
    p.options = *tiers[i].first;
    const uint64_t slots = std::max<uint64_t>(tiers[i].second, 1);
    EvictionConfig eviction = p.options.eviction;
    eviction.capacity_blocks = slots;
    KVTIER_ASSIGN_OR_RETURN(p.eviction, MakeEvictionPolicy(eviction));
    AdmissionConfig admission = p.options.admission;
    if (admission.window_blocks == 0) admission.window_blocks = slots;
    KVTIER_ASSIGN_OR_RETURN(p.admission, MakeAdmissionPolicy(admission));
  }
  return absl::OkStatus();
}

void TierManagerState::EnsureId(BlockId id) {
  if (id < resident_.size()) return;
  const size_t size = std::max<size_t>(size_t{id} + 1, resident_.size() * 2);
  resident_.resize(size, 0);
  checksum_.resize(size, 0);
  namespace_.resize(size, 0);
}

void TierManagerState::AddResident(Tier tier, BlockId id, uint64_t ghost_key, BlockId parent) {
  TierPolicies& p = Policies(tier);
  EnsureId(id);
  p.eviction->Insert(id, ghost_key);
  p.leaves.Add(id, ParentOf(parent));
  resident_[id] |= TierBit(tier);
}

void TierManagerState::RemoveResident(Tier tier, BlockId id, bool chosen_by_policy) {
  if (id >= resident_.size() || (resident_[id] & TierBit(tier)) == 0) return;
  TierPolicies& p = Policies(tier);
  if (!chosen_by_policy) p.eviction->Erase(id);
  p.leaves.Remove(id);
  resident_[id] &= static_cast<uint8_t>(~TierBit(tier));
}

void TierManagerState::AdoptRecovered(const BlockRecord& record, SlotId slot) {
  std::lock_guard lock(mu_);
  const NewBlock block{Tier::kT2, slot, record.payload_bytes, kNoBlock};
  absl::StatusOr<BlockIndex::InsertResult> r = index_.Insert(record.key, block);
  if (!r.ok() || !r->inserted) {
    // Two records of one key (or an index too small): keep the first, free the other's slot.
    deferred_t2_frees_.push_back(slot);
    return;
  }
  EnsureId(r->id);
  namespace_[r->id] = record.namespace_id;
  checksum_[r->id] = record.checksum;
  AddResident(Tier::kT2, r->id, record.key.lo, kNoBlock);
  counters_.recovered_blocks.fetch_add(1, std::memory_order_relaxed);
}

void TierManagerState::AttachT2(NvmeTier* t2) {
  t2_ = t2;
  if (t2_ != nullptr) FreeDeferredT2Slots();
}

absl::StatusOr<SlotId> TierManagerState::AllocateT1() {
  absl::StatusOr<SlotId> slot = t1_.Allocate();
  if (slot.ok()) {
    KickIfAboveHigh(Tier::kT1);
    return slot;
  }
  if (slot.status().code() != absl::StatusCode::kResourceExhausted) return slot;
  {
    std::lock_guard lock(mu_);
    Policies(Tier::kT1).draining = true;  // a full tier is above any watermark
    work_pending_ = true;
    cv_.notify_all();
  }
  // Full: make room now if a block can leave without I/O (clean, or nowhere to write it to).
  const bool t2_admits = t2_ != nullptr && t2_->Stats().admitting;
  bool freed = false;
  {
    std::lock_guard lock(mu_);
    if (std::optional<BlockId> victim = PickVictim(Tier::kT1, /*only_without_io=*/t2_admits)) {
      std::optional<BlockInfo> info = index_.FindById(*victim);
      RemoveResident(Tier::kT1, *victim, /*chosen_by_policy=*/true);
      counters_.t1_evictions.fetch_add(1, std::memory_order_relaxed);
      if (info && info->InTier(Tier::kT2)) {
        counters_.t1_clean_evictions.fetch_add(1, std::memory_order_relaxed);
      }
      freed = info && LeaveT1Locked(*info, /*count_as_dropped=*/!info->InTier(Tier::kT2));
    }
  }
  if (freed) slot = t1_.Allocate();
  if (slot.ok()) return slot;
  return absl::ResourceExhaustedError(
      "T1 is full: every block is leased or on its way to T2; retry shortly");
}

absl::StatusOr<SlotId> TierManagerState::AllocateForPut() {
  absl::StatusOr<SlotId> slot = AllocateT1();
  if (!slot.ok() && slot.status().code() == absl::StatusCode::kResourceExhausted) {
    counters_.puts_refused_full.fetch_add(1, std::memory_order_relaxed);
  }
  return slot;
}

absl::StatusOr<CommitOutcome> TierManagerState::Commit(const PutCommit& put, SlotId slot) {
  if (slot >= t1_.capacity_slots()) {
    return absl::InvalidArgumentError(fmt::format("put_commit: T1 slot {} is out of range", slot));
  }
  if (put.payload_bytes > t1_.slot_bytes()) {
    return absl::InvalidArgumentError(
        fmt::format("put_commit: payload of {} bytes exceeds a {}-byte slot", put.payload_bytes,
                    t1_.slot_bytes()));
  }
  bool free_slot = false;
  {
    std::lock_guard lock(mu_);
    BlockId parent = kNoBlock;
    if (put.parent != nullptr) {
      if (std::optional<BlockInfo> p = index_.Find(*put.parent)) parent = p->id;
    }
    KVTIER_ASSIGN_OR_RETURN(
        BlockIndex::InsertResult r,
        index_.Insert(put.key, NewBlock{Tier::kT1, slot, put.payload_bytes, parent}));
    // Present already: look only then (a second probe on every new put's hot path otherwise).
    std::optional<BlockInfo> info = r.inserted ? std::nullopt : index_.Find(put.key);
    if (!r.inserted && info && info->tiers != 0) {
      free_slot = true;
    } else {
      // New, or a block left in no tier (its last copy failed) waiting for its leases to end.
      if (!r.inserted) KVTIER_RETURN_IF_ERROR(index_.SetTier(put.key, Tier::kT1, slot));
      EnsureId(r.id);
      checksum_[r.id] = put.checksum;
      namespace_[r.id] = put.namespace_id;
      AddResident(Tier::kT1, r.id, put.key.lo, parent);
    }
  }
  if (free_slot) {
    t1_.Free(slot);
    counters_.puts_already_present.fetch_add(1, std::memory_order_relaxed);
    return CommitOutcome::kAlreadyPresent;
  }
  counters_.puts_committed.fetch_add(1, std::memory_order_relaxed);
  KickIfAboveHigh(Tier::kT1);
  return CommitOutcome::kStored;
}

void TierManagerState::Get(const BlockKey& key, Tier target, GetDone done) {
  if (target == Tier::kT2) {
    done(absl::InvalidArgumentError("get: blocks are read from T1 or T0, not T2"));
    return;
  }
  if (target == Tier::kT0 && t0_ == nullptr) {
    done(absl::FailedPreconditionError("get: this daemon runs without a T0 (GPU) tier"));
    return;
  }
  absl::StatusOr<BlockInfo> leased = index_.AcquireLease(key);
  if (!leased.ok()) {
    counters_.gets_missing.fetch_add(1, std::memory_order_relaxed);
    done(leased.status());
    return;
  }
  if (target == Tier::kT0) {
    LoadIntoT0(*leased, std::move(done));
  } else {
    LoadIntoT1(*leased, std::move(done));
  }
}

void TierManagerState::LoadIntoT1(const BlockInfo& info, GetDone done) {
  const BlockKey& key = info.key;
  if (info.InTier(Tier::kT1)) {  // the lease pins the T1 copy from here on
    {
      std::lock_guard lock(mu_);
      if (info.id < resident_.size() && (resident_[info.id] & TierBit(Tier::kT1)) != 0) {
        Policies(Tier::kT1).eviction->Touch(info.id);
      }
    }
    counters_.gets_t1.fetch_add(1, std::memory_order_relaxed);
    done(LeasedBlock{info.slots[static_cast<int>(Tier::kT1)], info.payload_bytes, Tier::kT1});
    return;
  }
  const bool from_t0 = t0_ != nullptr && info.InTier(Tier::kT0);
  if (!from_t0 && (t2_ == nullptr || !info.InTier(Tier::kT2))) {
    (void)Release(key);
    counters_.gets_missing.fetch_add(1, std::memory_order_relaxed);
    done(absl::NotFoundError(fmt::format("block {} has no copy in any tier", key.ToHex())));
    return;
  }
  StartPromotion(info, std::move(done));
}

void TierManagerState::StartPromotion(const BlockInfo& info, GetDone done) {
  const Tier source = t0_ != nullptr && info.InTier(Tier::kT0) ? Tier::kT0 : Tier::kT2;
  const SlotId source_slot = info.slots[static_cast<int>(source)];
  {
    std::lock_guard lock(mu_);
    auto [it, first] = promotions_.try_emplace(info.key);
    it->second.waiters.push_back(std::move(done));
    if (!first) return;  // a read of this block is already on its way into T1
    it->second.payload_bytes = info.payload_bytes;
    it->second.source = source;
    it->second.source_slot = source_slot;
  }
  absl::StatusOr<SlotId> t1_slot = AllocateT1();
  if (t1_slot.ok()) {
    IssuePromotionRead(info.key, source, source_slot, *t1_slot);
    return;
  }
  if (t1_slot.status().code() == absl::StatusCode::kResourceExhausted) {
    // T1 is full of blocks on their way to T2: the evictor starts this read when a slot frees.
    std::lock_guard lock(mu_);
    waiting_for_t1_.push_back(info.key);
    return;
  }
  FailPromotion(info.key, t1_slot.status());
}

void TierManagerState::IssuePromotionRead(const BlockKey& key, Tier source, SlotId source_slot,
                                          SlotId t1_slot) {
  const TierMove move{MoveKind::kPromotion, source, Tier::kT1};
  Storage(source)->Read(
      source_slot, t1_.SlotData(t1_slot),
      [this, key, t1_slot, move, started = std::chrono::steady_clock::now()](absl::Status s) {
        ReportMove(move, started, s);
        OnPromoted(key, t1_slot, std::move(s));
      });
}

void TierManagerState::ReportMove(const TierMove& move,
                                  std::chrono::steady_clock::time_point started,
                                  const absl::Status& status) const {
  if (!options_.on_move || !status.ok()) return;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  options_.on_move(move, took.count());
}

bool TierManagerState::StartWaitingPromotions() {
  bool worked = false;
  for (;;) {
    BlockKey key;
    Tier source;
    SlotId source_slot;
    {
      std::lock_guard lock(mu_);
      if (waiting_for_t1_.empty()) return worked;
      key = waiting_for_t1_.front();
      const Promotion& promotion = promotions_.at(key);
      source = promotion.source;
      source_slot = promotion.source_slot;
    }
    absl::StatusOr<SlotId> t1_slot = t1_.Allocate();
    if (!t1_slot.ok()) return worked;
    {
      std::lock_guard lock(mu_);
      waiting_for_t1_.pop_front();
    }
    IssuePromotionRead(key, source, source_slot, *t1_slot);
    worked = true;
  }
}

void TierManagerState::FailWaitingPromotions() {
  std::deque<BlockKey> keys;
  {
    std::lock_guard lock(mu_);
    keys.swap(waiting_for_t1_);
  }
  for (const BlockKey& key : keys) {
    FailPromotion(key, absl::ResourceExhaustedError(
                           "T1 is full of leased blocks: no room to promote into; retry"));
  }
}

void TierManagerState::FailPromotion(const BlockKey& key, const absl::Status& status) {
  std::vector<GetDone> waiters;
  {
    std::lock_guard lock(mu_);
    auto it = promotions_.find(key);
    waiters = std::move(it->second.waiters);
    promotions_.erase(it);
    cv_.notify_all();
  }
  FailWaiters(key, std::move(waiters), status);
}

void TierManagerState::OnPromoted(const BlockKey& key, SlotId t1_slot, absl::Status status) {
  std::vector<GetDone> waiters;
  LeasedBlock block{t1_slot, 0, Tier::kT1};
  bool keep_slot = false;
  Tier source;
  {
    std::lock_guard lock(mu_);
    auto it = promotions_.find(key);
    waiters = std::move(it->second.waiters);
    block.payload_bytes = it->second.payload_bytes;
    source = it->second.source;
    promotions_.erase(it);
    std::optional<BlockInfo> info = index_.Find(key);  // present: the waiters hold leases
    if (!info && status.ok()) status = absl::InternalError("promoted block left the index");
    if (status.ok() && info) {
      keep_slot = index_.SetTier(key, Tier::kT1, t1_slot).ok();
      if (!keep_slot) block.slot = info->slots[static_cast<int>(Tier::kT1)];  // put meanwhile
      if (keep_slot) AddResident(Tier::kT1, info->id, key.lo, info->parent);
      if (info->id < resident_.size() && (resident_[info->id] & TierBit(source)) != 0) {
        Policies(source).eviction->Touch(info->id);
      }
    } else if (info && source == Tier::kT2) {
      // The T2 copy is bad or unreadable: it is gone for everyone. T2 frees (or retires) its slot.
      // (A failed T0 read leaves the T0 copy: it may be leased, and its readers read it in place.)
      if (absl::StatusOr<uint32_t> t2_slot = index_.DropTier(key, Tier::kT2); t2_slot.ok()) {
        RemoveResident(Tier::kT2, info->id, /*chosen_by_policy=*/false);
        deferred_t2_frees_.push_back(*t2_slot);
        work_pending_ = true;
      }
    }
    cv_.notify_all();
  }
  if (!keep_slot) t1_.Free(t1_slot);
  if (!status.ok()) {
    counters_.promotion_failures.fetch_add(1, std::memory_order_relaxed);
    KVTIER_LOG(kWarn, "tiers", "promotion of block {} from {} failed: {}", key.ToHex(),
               TierName(source), std::string(status.message()));
    FailWaiters(key, std::move(waiters), status);
    return;
  }
  counters_.gets_promoted.fetch_add(waiters.size(), std::memory_order_relaxed);
  KickIfAboveHigh(Tier::kT1);
  for (GetDone& done : waiters) done(block);
}

void TierManagerState::FailWaiters(const BlockKey& key, std::vector<GetDone> waiters,
                                   const absl::Status& status) {
  for (GetDone& done : waiters) {
    (void)Release(key);
    done(status);
  }
}

absl::Status TierManagerState::Release(const BlockKey& key) {
  KVTIER_RETURN_IF_ERROR(index_.ReleaseLease(key));
  std::lock_guard lock(mu_);
  EraseIfUnusedLocked(key);
  return absl::OkStatus();
}

void TierManagerState::EraseIfUnusedLocked(const BlockKey& key) {
  std::optional<BlockInfo> info = index_.Find(key);
  if (info && info->tiers == 0 && info->leases == 0) (void)index_.Erase(key);
}

absl::Status TierManagerState::Drop(const BlockKey& key) {
  std::optional<SlotId> free_t1, free_t0;
  {
    std::lock_guard lock(mu_);
    KVTIER_ASSIGN_OR_RETURN(BlockInfo info, index_.Erase(key));
    RemoveResident(Tier::kT0, info.id, /*chosen_by_policy=*/false);
    RemoveResident(Tier::kT1, info.id, /*chosen_by_policy=*/false);
    RemoveResident(Tier::kT2, info.id, /*chosen_by_policy=*/false);
    if (info.InTier(Tier::kT0)) {
      auto demotion = t0_demotions_.find(key);
      if (demotion != t0_demotions_.end()) {
        demotion->second.dropped = true;  // its copy still reads the T0 slot
      } else {
        free_t0 = info.slots[static_cast<int>(Tier::kT0)];
      }
    }
    if (info.InTier(Tier::kT1)) {
      auto demotion = demotions_.find(key);
      if (demotion != demotions_.end()) {
        demotion->second.dropped = true;  // its write still reads the T1 slot
      } else {
        free_t1 = info.slots[static_cast<int>(Tier::kT1)];
      }
    }
    if (info.InTier(Tier::kT2)) {
      deferred_t2_frees_.push_back(info.slots[static_cast<int>(Tier::kT2)]);
      work_pending_ = true;
      cv_.notify_all();
    }
  }
  if (free_t1) t1_.Free(*free_t1);
  if (free_t0) t0_->Free(*free_t0);
  return absl::OkStatus();
}

TierManagerStats TierManagerState::Stats() const {
  TierManagerStats s;
  const Counters& c = counters_;
  s.puts_committed = c.puts_committed.load();
  s.puts_already_present = c.puts_already_present.load();
  s.puts_refused_full = c.puts_refused_full.load();
  s.gets_t1 = c.gets_t1.load();
  s.gets_promoted = c.gets_promoted.load();
  s.gets_missing = c.gets_missing.load();
  s.promotion_failures = c.promotion_failures.load();
  s.t1_evictions = c.t1_evictions.load();
  s.t1_clean_evictions = c.t1_clean_evictions.load();
  s.demotions = c.demotions.load();
  s.demotion_failures = c.demotion_failures.load();
  s.demotions_rejected = c.demotions_rejected.load();
  s.t1_dropped = c.t1_dropped.load();
  s.t2_evictions = c.t2_evictions.load();
  s.integrity_drops = c.integrity_drops.load();
  s.recovered_blocks = c.recovered_blocks.load();
  s.gets_t0 = c.gets_t0.load();
  s.gets_promoted_t0 = c.gets_promoted_t0.load();
  s.t0_promotion_failures = c.t0_promotion_failures.load();
  s.t0_evictions = c.t0_evictions.load();
  s.t0_clean_evictions = c.t0_clean_evictions.load();
  s.t0_demotions = c.t0_demotions.load();
  s.t0_demotion_failures = c.t0_demotion_failures.load();
  std::lock_guard lock(mu_);
  s.demotions_in_flight = demotions_.size();
  return s;
}

}  // namespace kvtier::internal
