// The mover's store path, residency bookkeeping, release, drop and stats. Reads are in
// mover_read.cc, shedding and moves down in mover_shed.cc.
#include "tiers/mover.h"

#include <fmt/format.h>

#include <utility>

#include "common/log.h"

namespace kvtier::internal {

Mover::Mover(const TierManagerOptions& options, BlockIndex& index, std::vector<MoverRung> rungs,
             Tier birth)
    : options_(options), index_(index), rungs_(std::move(rungs)), birth_(birth) {
  rungs_.resize(kNumTiers);
}

Mover::~Mover() = default;

absl::Status Mover::Init() {
  const std::array<const TierPolicyOptions*, kNumTiers> policies = {
      &options_.t0_policy, &options_.t1_policy, &options_.t2_policy};
  std::vector<RungOptions> rungs(kNumTiers);
  for (int r = 0; r < kNumTiers; ++r) {
    RungOptions& o = rungs[static_cast<size_t>(r)];
    o.name = std::string(TierName(TierOf(r)));
    o.policy = *policies[static_cast<size_t>(r)];
    high_watermark_[static_cast<size_t>(r)] = o.policy.high_watermark;
    // A persistent rung (T2) opens after the ladder is built: its size is known from the options.
    const bool persistent = RungOf(r).persistent;
    o.present = Storage(r) != nullptr || persistent;
    o.capacity_slots =
        Storage(r) != nullptr ? Storage(r)->capacity_slots() : RungOf(r).capacity_slots;
  }
  absl::MutexLock lock(&mu_);
  KVTIER_ASSIGN_OR_RETURN(ladder_, Ladder::Create(std::move(rungs)));
  return absl::OkStatus();
}

void Mover::EnsureId(BlockId id) {
  if (id < checksum_.size()) return;
  const size_t size = std::max<size_t>(size_t{id} + 1, checksum_.size() * 2);
  checksum_.resize(size, 0);
  namespace_.resize(size, 0);
}

void Mover::EnterLocked(int r, const BlockInfo& info) {
  ladder_->Enter(r, info.id, info.key.lo, info.parent);
}

void Mover::AdoptRecovered(const BlockRecord& record, SlotId slot) {
  const int t2 = TierIndex(Tier::kT2);
  absl::MutexLock lock(&mu_);
  const NewBlock block{Tier::kT2, slot, record.payload_bytes, kNoBlock};
  absl::StatusOr<BlockIndex::InsertResult> r = index_.Insert(record.key, block);
  if (!r.ok() || !r->inserted) {
    // Two records of one key (or an index too small): keep the first, free the other's slot.
    deferred_frees_.emplace_back(t2, slot);
    return;
  }
  EnsureId(r->id);
  namespace_[r->id] = record.namespace_id;
  checksum_[r->id] = record.checksum;
  ladder_->Enter(t2, r->id, record.key.lo, kNoBlock);
  recovered_blocks_.fetch_add(1, std::memory_order_relaxed);
}

void Mover::AttachPersistent(Tier tier, MoverRung rung) {
  {
    absl::MutexLock lock(&mu_);
    rungs_[static_cast<size_t>(TierIndex(tier))] = rung;
  }
  DoDeferredFrees();
}

void Mover::Kick() {
  absl::MutexLock lock(&mu_);
  work_pending_ = true;
  cv_.SignalAll();
}

void Mover::KickIfAboveHigh(int r) {
  StorageTier* storage = Storage(r);
  if (storage == nullptr) return;
  const TierStats s = storage->Stats();
  const double high = high_watermark_[static_cast<size_t>(r)];
  if (static_cast<double>(s.used_slots) > high * static_cast<double>(s.capacity_slots)) Kick();
}

void Mover::ReportMove(const TierMove& move, std::chrono::steady_clock::time_point started,
                       const absl::Status& status) const {
  if (!options_.on_move || !status.ok()) return;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  options_.on_move(move, took.count());
}

void Mover::FreeSlotLocked(int r, SlotId slot) {
  if (RungOf(r).persistent) {
    deferred_frees_.emplace_back(r, slot);
    work_pending_ = true;
    cv_.SignalAll();
    return;
  }
  Storage(r)->Free(slot);
}

bool Mover::LeaveLocked(int r, const BlockInfo& info, bool dropped) {
  absl::StatusOr<uint32_t> slot = index_.ClearTier(info.key, TierOf(r));
  if (!slot.ok()) {
    // A lease pinned it after it was chosen: it stays, back in the policy as a fresh insert.
    std::optional<BlockInfo> now = index_.Find(info.key);
    if (now && now->InTier(TierOf(r)) && (ladder_->Mask(now->id) & (1u << r)) == 0) {
      EnterLocked(r, *now);
    }
    return false;
  }
  FreeSlotLocked(r, *slot);
  if (dropped) ++ladder_->counters(r).dropped;
  EraseIfUnusedLocked(info.key);
  return true;
}

void Mover::EraseIfUnusedLocked(const BlockKey& key) {
  std::optional<BlockInfo> info = index_.Find(key);
  if (info && info->tiers == 0 && info->leases == 0) (void)index_.Erase(key);
}

bool Mover::Admitting(int r) const {
  return r != Ladder::kNone && Storage(r) != nullptr && Storage(r)->Stats().admitting;
}

absl::StatusOr<SlotId> Mover::AllocateIn(int r) {
  absl::StatusOr<SlotId> slot = Storage(r)->Allocate();
  if (slot.ok()) {
    KickIfAboveHigh(r);
    return slot;
  }
  if (slot.status().code() != absl::StatusCode::kResourceExhausted) return slot;
  int below;
  {
    absl::MutexLock lock(&mu_);
    ladder_->MarkFull(r);  // a full rung is above any watermark
    work_pending_ = true;
    cv_.SignalAll();
    below = ladder_->Below(r);
  }
  // Full: make room now if a block can leave without a move (a copy below, or nowhere to go).
  const bool below_admits = Admitting(below);
  bool freed = false;
  {
    absl::MutexLock lock(&mu_);
    std::optional<BlockId> victim = ladder_->Choose(r, [&](BlockId id) {
      std::optional<BlockInfo> info = index_.FindById(id);
      return info && info->leases == 0 && (!below_admits || ladder_->HasCopyBelow(r, info->tiers));
    });
    if (victim) {
      if (std::optional<BlockInfo> info = index_.FindById(*victim)) {
        const VictimFate fate = ladder_->FateOf(r, info->tiers, info->key.lo, below_admits);
        // kMoveDown cannot happen here (only clean victims when the rung below admits).
        freed = fate != VictimFate::kMoveDown &&
                LeaveLocked(r, *info, /*dropped=*/fate == VictimFate::kDrop);
      }
    }
  }
  if (freed) slot = Storage(r)->Allocate();
  if (slot.ok()) return slot;
  return absl::ResourceExhaustedError(fmt::format(
      "{} is full: every block is leased or on its way down; retry shortly", TierName(TierOf(r))));
}

absl::StatusOr<SlotId> Mover::AllocateForPut() {
  absl::StatusOr<SlotId> slot = AllocateIn(birth());
  if (!slot.ok() && slot.status().code() == absl::StatusCode::kResourceExhausted) {
    puts_refused_full_.fetch_add(1, std::memory_order_relaxed);
  }
  return slot;
}

void Mover::AbortPut(SlotId slot) { Storage(birth())->Free(slot); }

absl::StatusOr<CommitOutcome> Mover::Commit(const PutCommit& put, SlotId slot) {
  StorageTier& tier = *Storage(birth());
  if (slot >= tier.capacity_slots()) {
    return absl::InvalidArgumentError(
        fmt::format("put_commit: {} slot {} is out of range", TierName(birth_), slot));
  }
  if (put.payload_bytes > tier.slot_bytes()) {
    return absl::InvalidArgumentError(
        fmt::format("put_commit: payload of {} bytes exceeds a {}-byte slot", put.payload_bytes,
                    tier.slot_bytes()));
  }
  bool free_slot = false;
  {
    absl::MutexLock lock(&mu_);
    BlockId parent = kNoBlock;
    if (put.parent != nullptr) {
      if (std::optional<BlockInfo> p = index_.Find(*put.parent)) parent = p->id;
    }
    KVTIER_ASSIGN_OR_RETURN(
        BlockIndex::InsertResult r,
        index_.Insert(put.key, NewBlock{birth_, slot, put.payload_bytes, parent}));
    // Present already: look only then (a second probe on every new put's hot path otherwise).
    std::optional<BlockInfo> info = r.inserted ? std::nullopt : index_.Find(put.key);
    if (!r.inserted && info && info->tiers != 0) {
      free_slot = true;
    } else {
      // New, or a block left in no tier (its last copy failed) waiting for its leases to end.
      if (!r.inserted) KVTIER_RETURN_IF_ERROR(index_.SetTier(put.key, birth_, slot));
      EnsureId(r.id);
      checksum_[r.id] = put.checksum;
      namespace_[r.id] = put.namespace_id;
      ladder_->Enter(birth(), r.id, put.key.lo, parent);
      ++ladder_->counters(birth()).born;
    }
  }
  if (free_slot) {
    tier.Free(slot);
    puts_already_present_.fetch_add(1, std::memory_order_relaxed);
    return CommitOutcome::kAlreadyPresent;
  }
  puts_committed_.fetch_add(1, std::memory_order_relaxed);
  KickIfAboveHigh(birth());
  return CommitOutcome::kStored;
}

absl::Status Mover::Release(const BlockKey& key) {
  KVTIER_RETURN_IF_ERROR(index_.ReleaseLease(key));
  absl::MutexLock lock(&mu_);
  EraseIfUnusedLocked(key);
  return absl::OkStatus();
}

absl::Status Mover::Drop(const BlockKey& key) {
  std::vector<std::pair<int, SlotId>> free_now;
  {
    absl::MutexLock lock(&mu_);
    KVTIER_ASSIGN_OR_RETURN(BlockInfo info, index_.Erase(key));
    for (int r = 0; r < kNumTiers; ++r) {
      ladder_->Remove(r, info.id);
      if (!info.InTier(TierOf(r))) continue;
      // A move down out of this rung still reads the slot: it frees both slots when it ends.
      const int below = ladder_->Below(r);
      Move* move = below == Ladder::kNone ? nullptr : moves_.Find(key, below);
      if (move != nullptr && move->from == r) {
        move->dropped = true;
      } else if (RungOf(r).persistent) {
        FreeSlotLocked(r, info.slots[static_cast<size_t>(r)]);
      } else {
        free_now.emplace_back(r, info.slots[static_cast<size_t>(r)]);
      }
    }
  }
  for (const auto& [r, slot] : free_now) Storage(r)->Free(slot);
  return absl::OkStatus();
}

TierManagerStats Mover::Stats() const {
  TierManagerStats s;
  s.puts_committed = puts_committed_.load(std::memory_order_relaxed);
  s.puts_already_present = puts_already_present_.load(std::memory_order_relaxed);
  s.puts_refused_full = puts_refused_full_.load(std::memory_order_relaxed);
  s.gets_missing = gets_missing_.load(std::memory_order_relaxed);
  s.integrity_drops = integrity_drops_.load(std::memory_order_relaxed);
  s.recovered_blocks = recovered_blocks_.load(std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  s.moves_in_flight = moves_.size();
  for (int r = 0; r < kNumTiers; ++r) s.tiers[static_cast<size_t>(r)] = ladder_->counters(r);
  return s;
}

}  // namespace kvtier::internal
