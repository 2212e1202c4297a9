// The mover's store path, residency bookkeeping, release, drop and stats. Reads are in
// mover_read.cc, shedding and moves down in mover_shed.cc.
#include "tiers/mover.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace kvtier::internal {

Mover::Mover(const TierManagerOptions& options, BlockIndex& index, std::vector<MoverRung> rungs,
             Tier birth)
    : options_(options),
      index_(index),
      rungs_(std::move(rungs)),
      birth_(birth),
      staging_(options.t1.slot_bytes, std::min<uint32_t>(options.max_demotions_in_flight, 8)) {
  rungs_.resize(kNumTiers);
}

Mover::~Mover() = default;

absl::Status Mover::Init() {
  const std::array<const TierPolicyOptions*, kNumTiers> policies = {
      &options_.t0_policy, &options_.t1_policy, &options_.t2_policy, &options_.t3_policy};
  std::vector<RungOptions> rungs(kNumTiers);
  for (int r = 0; r < kNumTiers; ++r) {
    RungOptions& o = rungs[static_cast<size_t>(r)];
    o.name = std::string(TierName(TierOf(r)));
    o.policy = *policies[static_cast<size_t>(r)];
    o.climb_to = RungOf(r).climb_to;
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
  // Unleased, it may be a victim in r, and its copies above r now have a copy below.
  if (info.leases == 0) EvictableLocked(static_cast<TierMask>(info.tiers | TierBit(TierOf(r))));
}

void Mover::EvictableLocked(TierMask tiers) {
  for (int r = 0; r < kNumTiers; ++r) {
    if ((tiers & TierBit(TierOf(r))) != 0) ++evictable_generation_[static_cast<size_t>(r)];
  }
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
  std::vector<SlotId> one;
  KVTIER_RETURN_IF_ERROR(AllocateManyIn(r, 1, one));
  return one.front();
}

absl::Status Mover::AllocateManyIn(int r, size_t count, std::vector<SlotId>& out) {
  const size_t goal = out.size() + count;
  absl::Status why;
  while (out.size() < goal && why.ok()) {
    absl::StatusOr<SlotId> slot = Storage(r)->Allocate();
    if (slot.ok()) {
      out.push_back(*slot);
    } else {
      why = slot.status();
    }
  }
  if (out.size() < goal && why.code() == absl::StatusCode::kResourceExhausted) {
    // What the victims freed, and whatever the evictor freed meanwhile (it may have taken the
    // blocks we would have chosen).
    (void)FreeVictims(r, goal - out.size());
    while (out.size() < goal) {
      absl::StatusOr<SlotId> slot = Storage(r)->Allocate();
      if (!slot.ok()) return FullError(r);  // taken by another writer, or none could leave
      out.push_back(*slot);
    }
  }
  if (out.size() < goal) return why;
  KickIfAboveHigh(r);
  return absl::OkStatus();
}

absl::Status Mover::FullError(int r) const {
  return absl::ResourceExhaustedError(fmt::format(
      "{} is full: every block is leased or on its way down; retry shortly", TierName(TierOf(r))));
}

size_t Mover::FreeVictims(int r, size_t want) {
  int below;
  {
    absl::MutexLock lock(&mu_);
    ladder_->MarkFull(r);  // a full rung is above any watermark
    work_pending_ = true;
    cv_.SignalAll();
    below = ladder_->Below(r);
  }
  // Full: make room now where a block can leave without a move (a copy below, or nowhere to go).
  const bool below_admits = Admitting(below);  // outside mu_: T2 takes its own lock
  size_t freed = 0;
  absl::MutexLock lock(&mu_);
  // A victim a lease pinned after it was chosen goes back into the policy; a few more tries
  // each, not a walk around the whole rung.
  for (size_t tries = 0; freed < want && tries < 2 * want + 2; ++tries) {
    std::optional<BlockId> victim = ChooseUnleasedLocked(
        r,
        [&](const BlockInfo& info) {
          return !below_admits || ladder_->HasCopyBelow(r, info.tiers);
        },
        no_victim_to_free_[static_cast<size_t>(r)], below_admits);
    if (!victim) break;
    std::optional<BlockInfo> info = index_.FindById(*victim);
    if (!info) continue;
    const VictimFate fate = ladder_->FateOf(r, info->tiers, info->key.lo, below_admits);
    // kMoveDown cannot happen here (only clean victims when the rung below admits).
    if (fate != VictimFate::kMoveDown && LeaveLocked(r, *info, fate == VictimFate::kDrop)) ++freed;
  }
  return freed;
}

absl::Status Mover::AllocateManyForPut(Tier tier, size_t count, std::vector<SlotId>& out) {
  KVTIER_ASSIGN_OR_RETURN(const int r, PutRung(tier, "put_begin"));
  absl::Status status = AllocateManyIn(r, count, out);
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    puts_refused_full_.fetch_add(1, std::memory_order_relaxed);
  }
  return status;
}

absl::StatusOr<int> Mover::PutRung(Tier tier, std::string_view op) const {
  const int r = TierIndex(tier);
  if (r < 0 || r >= kNumTiers || !RungOf(r).client_readable) {
    return absl::InvalidArgumentError(
        fmt::format("{}: blocks are written into T1 or T0, not {}", op, TierName(tier)));
  }
  if (Storage(r) == nullptr) {
    return absl::FailedPreconditionError(
        fmt::format("{}: this daemon runs without a {} tier", op, TierName(tier)));
  }
  return r;
}

absl::StatusOr<SlotId> Mover::AllocateForPut(Tier tier) {
  std::vector<SlotId> one;
  KVTIER_RETURN_IF_ERROR(AllocateManyForPut(tier, 1, one));
  return one.front();
}

absl::Status Mover::AbortPut(Tier tier, SlotId slot) {
  KVTIER_ASSIGN_OR_RETURN(const int r, PutRung(tier, "put_abort"));
  if (slot >= Storage(r)->capacity_slots()) {
    return absl::InvalidArgumentError(
        fmt::format("put_abort: {} slot {} is out of range", TierName(tier), slot));
  }
  Storage(r)->Free(slot);
  return absl::OkStatus();
}

absl::StatusOr<CommitOutcome> Mover::Commit(const PutCommit& put, SlotId slot) {
  KVTIER_ASSIGN_OR_RETURN(const int r, PutRung(put.tier, "put_commit"));
  StorageTier& tier = *Storage(r);
  if (slot >= tier.capacity_slots()) {
    return absl::InvalidArgumentError(
        fmt::format("put_commit: {} slot {} is out of range", TierName(put.tier), slot));
  }
  if (put.payload_bytes > tier.slot_bytes()) {
    return absl::InvalidArgumentError(
        fmt::format("put_commit: payload of {} bytes exceeds a {}-byte slot", put.payload_bytes,
                    tier.slot_bytes()));
  }
  bool free_slot = false;
  absl::StatusOr<CommitOutcome> outcome;
  {
    absl::MutexLock lock(&mu_);
    outcome = CommitLocked(put, r, slot, &free_slot);
  }
  if (free_slot) tier.Free(slot);
  if (!outcome.ok()) return outcome;
  if (*outcome == CommitOutcome::kAlreadyPresent) {
    puts_already_present_.fetch_add(1, std::memory_order_relaxed);
    return outcome;
  }
  puts_committed_.fetch_add(1, std::memory_order_relaxed);
  KickIfAboveHigh(r);
  return outcome;
}

absl::StatusOr<CommitOutcome> Mover::CommitLocked(const PutCommit& put, int r, SlotId slot,
                                                  bool* free_slot) {
  BlockId parent = kNoBlock;
  if (put.parent != nullptr) {
    if (std::optional<BlockInfo> p = index_.Find(*put.parent)) parent = p->id;
  }
  KVTIER_ASSIGN_OR_RETURN(
      BlockIndex::InsertResult ins,
      index_.Insert(put.key, NewBlock{put.tier, slot, put.payload_bytes, parent}));
  if (!ins.inserted) {
    // Present already: look only then (a second probe on every new put's hot path otherwise).
    std::optional<BlockInfo> info = index_.Find(put.key);
    if (!info) return absl::InternalError("put_commit: the block left the index under the lock");
    if (put.working) {
      // The writer keeps its slot when the key is in this tier or on its way into it; otherwise
      // the slot becomes the block's copy in this tier (it may be cached only below, or in no
      // tier while leases end).
      if (info->InTier(put.tier) || moves_.Find(put.key, r) != nullptr) {
        return CommitOutcome::kAlreadyPresent;
      }
    } else if (info->tiers != 0) {
      *free_slot = true;
      return CommitOutcome::kAlreadyPresent;
    }
  }
  // A working slot's writer goes on reading it: leased before the evictor can see the copy.
  if (put.working) {
    if (absl::Status leased = index_.AcquireLease(put.key).status(); !leased.ok()) {
      if (ins.inserted) (void)index_.Erase(put.key);
      return leased;  // the slot stays the writer's
    }
  }
  if (!ins.inserted) {
    if (absl::Status set = index_.SetTier(put.key, put.tier, slot); !set.ok()) {
      if (put.working) (void)index_.ReleaseLease(put.key);
      return set;
    }
  }
  EnsureId(ins.id);
  if (checksum_[ins.id] == 0 || ins.inserted) checksum_[ins.id] = put.checksum;
  namespace_[ins.id] = put.namespace_id;
  ladder_->Enter(r, ins.id, put.key.lo, parent);
  ++ladder_->counters(r).born;
  if (WritesThrough(r)) {
    write_through_.emplace_back(r, put.key);
    work_pending_ = true;
    cv_.SignalAll();
  }
  return CommitOutcome::kStored;
}

absl::Status Mover::Release(const BlockKey& key) {
  KVTIER_RETURN_IF_ERROR(index_.ReleaseLease(key));
  absl::MutexLock lock(&mu_);
  if (std::optional<BlockInfo> info = index_.Find(key); info && info->leases == 0) {
    EvictableLocked(info->tiers);
  }
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
  s.eviction_candidates = eviction_candidates_.load(std::memory_order_relaxed);
  s.eviction_choices_skipped = eviction_choices_skipped_.load(std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  s.moves_in_flight = moves_.size();
  for (int r = 0; r < kNumTiers; ++r) s.tiers[static_cast<size_t>(r)] = ladder_->counters(r);
  return s;
}

}  // namespace kvtier::internal
