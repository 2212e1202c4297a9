// The mover's evictor side: watermarks, victims and their fates (tiers/ladder.h), moves down into
// the next rung, deferred frees, and the waits (quiesce, drain, flush).
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <utility>

#include "common/checksum.h"
#include "common/log.h"
#include "tiers/mover.h"

namespace kvtier::internal {

bool Mover::ShouldShed(int r) {
  StorageTier* storage = Storage(r);
  if (storage == nullptr) return false;
  const TierStats s = storage->Stats();  // outside mu_: T2 takes its own lock
  absl::MutexLock lock(&mu_);
  // Replay-exact mode: occupancy is what the ladder holds, as replay counts it (no moves are in
  // flight when the evictor decides; a put's slot counts once the block is committed).
  if (options_.settle_each_move) return ladder_->ShouldShed(r, ladder_->Size(r));
  // Slots of victims on their way down are as good as free: they are released when the moves end.
  const uint64_t used = s.used_slots - std::min<uint64_t>(s.used_slots, moves_.leaving(r));
  // Flushing empties the host rung and every rung above it (T0): a block born in T0 reaches T2
  // through T1 like any T0 victim, and one with a lower copy just leaves.
  if (r <= birth() && flushing_.load(std::memory_order_relaxed)) return used > 0;
  return ladder_->ShouldShed(r, used);
}

bool Mover::EvictStep() {
  bool worked = DoDeferredFrees();
  worked |= StartWaitingReads();
  std::vector<int> order;
  {
    absl::MutexLock lock(&mu_);
    if (options_.settle_each_move && (!moves_.empty() || waiters_for_idle_ == 0)) return worked;
    order = ladder_->ShedOrder();
  }
  for (int r : order) {
    const bool over = ShouldShed(r);  // always asked: it keeps the rung's hysteresis state
    bool room, idle, reads_wait = false;
    {
      absl::MutexLock lock(&mu_);
      room = moves_.leaving(r) < options_.max_demotions_in_flight;
      idle = moves_.leaving(r) == 0;
      for (const MoveKey& id : moves_.waiting_for_room()) reads_wait |= id.to == r;
    }
    // A read waiting for a slot of `r` needs room even where the watermarks ask for none (a full
    // rung whose low watermark is 1.0): make it, or fail the read below.
    if (!over && !reads_wait) continue;
    if (!room) continue;
    if (ShedOnce(r)) {
      worked = true;
      absl::MutexLock lock(&mu_);
      // Replay-exact mode: a step ends at a move down; the next one sees it landed (ladder.h).
      if (options_.settle_each_move && !moves_.empty()) break;
      continue;
    }
    // Nothing can leave `r` and nothing is on its way out: reads waiting for room would wait
    // until some client releases a lease. They fail instead; their Gets may retry.
    if (idle) FailWaitingReads(r);
  }
  return WriteThroughStep() || worked;
}

bool Mover::WritesThrough(int r) const {
  return options_.t0_write_through && !options_.settle_each_move && r < birth() &&
         Storage(r) != nullptr;
}

bool Mover::WriteThroughStep() {
  std::vector<std::pair<MoveKey, SlotId>> started;
  {
    absl::MutexLock lock(&mu_);
    while (!write_through_.empty()) {
      const auto [r, key] = write_through_.front();
      const int below = ladder_->Below(r);
      if (below == Ladder::kNone || moves_.copying(r) >= options_.max_demotions_in_flight) break;
      std::optional<BlockInfo> info = index_.Find(key);
      // Gone, evicted, copied below already, or chosen for a move (out of the policy): skip it.
      if (!info || !info->InTier(TierOf(r)) || ladder_->HasCopyBelow(r, info->tiers) ||
          moves_.Find(key, below) != nullptr || (ladder_->Mask(info->id) & (1u << r)) == 0) {
        write_through_.pop_front();
        continue;
      }
      absl::StatusOr<SlotId> slot = Storage(below)->Allocate();  // O(1), no I/O
      if (!slot.ok()) break;  // no free slot below now: the rung's evictor makes room; later
      write_through_.pop_front();
      // Out of the policy while the copy reads the slot: no victim choice can free it meanwhile.
      ladder_->Remove(r, info->id);
      Move move;
      move.from = r;
      move.keep_source = true;
      move.src_slot = info->slots[static_cast<size_t>(r)];
      move.payload_bytes = info->payload_bytes;
      move.expected_checksum = checksum_[info->id];
      move.namespace_id = namespace_[info->id];
      moves_.Add(MoveKey{key, below}, std::move(move));
      started.emplace_back(MoveKey{key, below}, *slot);
    }
  }
  for (const auto& [id, slot] : started) {
    KickIfAboveHigh(id.to);
    Issue(id, slot);
  }
  return !started.empty();
}

void Mover::FinishWriteThroughLocked(const MoveKey& id, Move& move, const absl::Status& status) {
  const int from = move.from, to = id.to;
  std::optional<BlockInfo> info = move.dropped ? std::nullopt : index_.Find(id.key);
  if (!info) {  // dropped meanwhile: both slots go
    if (move.dst_slot != kNoSlot) FreeSlotLocked(to, move.dst_slot);
    FreeSlotLocked(from, move.src_slot);
    return;
  }
  if (!status.ok()) {
    if (move.dst_slot != kNoSlot) FreeSlotLocked(to, move.dst_slot);
    ++ladder_->counters(from).move_down_failures;
    KVTIER_LOG(kWarn, "tiers",
               "write-through of block {} from {} to {} failed (it stays in {}): {}",
               id.key.ToHex(), TierName(TierOf(from)), TierName(TierOf(to)), TierName(TierOf(from)),
               std::string(status.message()));
  } else if (index_.SetTier(id.key, TierOf(to), move.dst_slot).ok()) {
    EnterLocked(to, *info);
    ++ladder_->counters(from).written_through;
  } else {  // a read copied it there meanwhile: that copy stays
    FreeSlotLocked(to, move.dst_slot);
  }
  if (info->InTier(TierOf(from)) && (ladder_->Mask(info->id) & (1u << from)) == 0) {
    EnterLocked(from, *info);  // back in its rung's policy, clean now
  }
}

std::optional<BlockId> Mover::ChooseUnleasedLocked(int r,
                                                   absl::FunctionRef<bool(const BlockInfo&)> also,
                                                   NoVictim& none, bool below_admits) {
  const uint64_t generation = evictable_generation_[static_cast<size_t>(r)];
  const auto now = std::chrono::steady_clock::now();
  if (none.valid && none.generation == generation && none.below_admits == below_admits &&
      now - none.at < kNoVictimTtl) {
    eviction_choices_skipped_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  passed_over_.clear();
  uint64_t looked = 0;
  std::optional<BlockId> victim = ladder_->Choose(r, [&](BlockId id) {
    ++looked;
    std::optional<BlockInfo> info = index_.FindById(id);
    if (!info) return false;
    if (info->leases > 0) {
      passed_over_.push_back(id);
      return false;
    }
    return also(*info);
  });
  for (BlockId id : passed_over_) ladder_->Touch(r, id);  // after: Choose may not be re-entered
  eviction_candidates_.fetch_add(looked, std::memory_order_relaxed);
  none =
      NoVictim{.generation = generation, .valid = !victim, .below_admits = below_admits, .at = now};
  return victim;
}

bool Mover::ShedOnce(int r) {
  int below;
  {
    absl::MutexLock lock(&mu_);
    below = ladder_->Below(r);
  }
  const bool below_admitting = Admitting(below);  // outside mu_: T2 takes its own lock
  std::optional<MoveKey> down;
  {
    absl::MutexLock lock(&mu_);
    std::optional<BlockId> victim = ChooseUnleasedLocked(
        r, [](const BlockInfo&) { return true; }, no_victim_to_shed_[static_cast<size_t>(r)],
        below_admitting);
    if (!victim) return false;
    std::optional<BlockInfo> info = index_.FindById(*victim);
    if (!info) return true;
    if (below != Ladder::kNone && moves_.Find(info->key, below) != nullptr) {
      EnterLocked(r, *info);  // a copy is on its way below already: decide again when it lands
      return false;
    }
    const VictimFate fate = ladder_->FateOf(r, info->tiers, info->key.lo, below_admitting);
    if (fate != VictimFate::kMoveDown) {
      LeaveLocked(r, *info, /*dropped=*/fate == VictimFate::kDrop);
    } else {
      Move move;
      move.from = r;
      move.src_slot = info->slots[static_cast<size_t>(r)];
      move.payload_bytes = info->payload_bytes;
      move.expected_checksum = checksum_[info->id];
      move.namespace_id = namespace_[info->id];
      down = MoveKey{info->key, below};
      moves_.Add(*down, std::move(move));
    }
  }
  if (down) {
    StartMoveDown(*down);
  } else if (RungOf(r).persistent) {
    DoDeferredFrees();  // the slot is free before the evictor looks at the watermark again
  }
  return true;
}

void Mover::StartMoveDown(const MoveKey& id) {
  absl::StatusOr<SlotId> slot = AllocateIn(id.to);
  if (RungOf(id.to).persistent) DoDeferredFrees();  // room AllocateIn made there
  if (slot.ok()) {
    Issue(id, *slot);
    return;
  }
  // No room below now: a rung not admitting drops the victim; a full one (every block leased or
  // moving) keeps it, back in its policy, until the evictor comes back.
  absl::MutexLock lock(&mu_);
  Move move = moves_.Take(id);
  cv_.SignalAll();
  std::optional<BlockInfo> info = move.dropped ? std::nullopt : index_.Find(id.key);
  if (!info) {
    FreeSlotLocked(move.from, move.src_slot);
    return;
  }
  if (slot.status().code() != absl::StatusCode::kResourceExhausted) {
    ++ladder_->counters(move.from).rejected;
    LeaveLocked(move.from, *info, /*dropped=*/true);
  } else if (info->InTier(TierOf(move.from)) &&
             (ladder_->Mask(info->id) & (1u << move.from)) == 0) {
    EnterLocked(move.from, *info);
  }
}

bool Mover::PrepareForPersist(const MoveKey& id, const Move& move, std::byte* src,
                              uint64_t* checksum) {
  *checksum = PayloadChecksum(src, move.payload_bytes);
  if (move.expected_checksum != 0 && *checksum != move.expected_checksum) {
    integrity_drops_.fetch_add(1, std::memory_order_relaxed);
    KVTIER_LOG(kError, "tiers",
               "block {}: {} payload no longer matches the checksum given at commit; dropped, not "
               "written to {} (a client wrote to a committed slot?)",
               id.key.ToHex(), TierName(TierOf(move.from)), TierName(TierOf(id.to)));
    return false;
  }
  // The write covers whole write_align blocks (O_DIRECT), so the bytes of the slot between the
  // payload's end and the next boundary reach the disk too. They are whatever the slot held before
  // (another block's, maybe another namespace's): zeroed, so nothing but this block's payload is
  // persisted. The slot (or staging buffer) is the block's (committed, so no writer) and readers
  // read only payload_bytes.
  const uint32_t align = RungOf(id.to).write_align;
  if (align != 0 && move.payload_bytes % align != 0) {
    std::memset(src + move.payload_bytes, 0, align - move.payload_bytes % align);
  }
  return true;
}

void Mover::FinishMoveDownLocked(const MoveKey& id, Move& move, const absl::Status& status) {
  if (move.keep_source) {
    FinishWriteThroughLocked(id, move, status);
    return;
  }
  const int from = move.from, to = id.to;
  std::optional<BlockInfo> info = move.dropped ? std::nullopt : index_.Find(id.key);
  if (!status.ok() || !info) {  // failed, or dropped meanwhile: no copy below, and this one goes
    if (move.dst_slot != kNoSlot) FreeSlotLocked(to, move.dst_slot);
    if (!status.ok() && status.code() != absl::StatusCode::kDataLoss) {
      ++ladder_->counters(from).move_down_failures;
      KVTIER_LOG(kWarn, "tiers", "move of block {} from {} to {} failed, block dropped: {}",
                 id.key.ToHex(), TierName(TierOf(from)), TierName(TierOf(to)),
                 std::string(status.message()));
    }
    if (info) {
      LeaveLocked(from, *info, /*dropped=*/true);
    } else {
      FreeSlotLocked(from, move.src_slot);
    }
    return;
  }
  if (index_.SetTier(id.key, TierOf(to), move.dst_slot).ok()) {
    EnterLocked(to, *info);
    ++ladder_->counters(from).moved_down;
  } else {  // a read copied it there meanwhile: that copy stays
    FreeSlotLocked(to, move.dst_slot);
  }
  LeaveLocked(from, *info, /*dropped=*/false);  // stays (now clean) if leased meanwhile
}

bool Mover::DoDeferredFrees() {
  std::vector<std::pair<int, SlotId>> frees;
  {
    absl::MutexLock lock(&mu_);
    frees.swap(deferred_frees_);
  }
  for (const auto& [r, slot] : frees) {
    if (StorageTier* storage = Storage(r)) storage->Free(slot);
  }
  return !frees.empty();
}

bool Mover::InFlightLocked() const {
  return !moves_.empty() || chains_ != 0 || moves_.any_waiting();
}

void Mover::WaitForWork(int timeout_ms) {
  absl::MutexLock lock(&mu_);
  if (!work_pending_ && !stop_) {
    evictor_idle_ = true;
    cv_.SignalAll();
    const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
    while (!work_pending_ && !stop_.load() && !cv_.WaitWithDeadline(&mu_, deadline)) {
    }
    evictor_idle_ = false;
  }
  work_pending_ = false;
}

void Mover::Stop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  cv_.SignalAll();
}

void Mover::Quiesce() {
  absl::MutexLock lock(&mu_);
  ++waiters_for_idle_;
  work_pending_ = true;
  cv_.SignalAll();
  while (!stop_.load() &&
         !(evictor_idle_ && !work_pending_ && !InFlightLocked() && deferred_frees_.empty())) {
    cv_.Wait(&mu_);
  }
  --waiters_for_idle_;
}

bool Mover::Flush(std::chrono::steady_clock::time_point deadline) {
  flushing_ = true;
  bool finished = true;
  {
    absl::MutexLock lock(&mu_);
    ++waiters_for_idle_;
    work_pending_ = true;
    cv_.SignalAll();
    // Done when the evictor found nothing more it could move (the rung is empty but for leased
    // blocks and open puts) and the last move has settled.
    const absl::Time until = absl::FromChrono(std::chrono::system_clock::now() +
                                              (deadline - std::chrono::steady_clock::now()));
    while (!stop_.load() && !(evictor_idle_ && !work_pending_ && moves_.empty())) {
      // A passed deadline ends the flush without releasing the lock: waiting "until the past"
      // still lets the evictor run first, and the answer would depend on the scheduler.
      if (absl::Now() >= until) {
        finished = false;
        break;
      }
      if (cv_.WaitWithDeadline(&mu_, until)) {
        finished = stop_.load() || (evictor_idle_ && !work_pending_ && moves_.empty());
        break;
      }
    }
    --waiters_for_idle_;
  }
  flushing_ = false;
  return finished;
}

void Mover::Drain() {
  for (int r = 0; r < kNumTiers; ++r) FailWaitingReads(r);  // the evictor is gone
  {
    absl::MutexLock lock(&mu_);
    while (!moves_.empty() || chains_ != 0) cv_.Wait(&mu_);
  }
  DoDeferredFrees();
}

}  // namespace kvtier::internal
