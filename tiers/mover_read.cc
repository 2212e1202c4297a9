// The mover's read path: a Get's copy into its target rung, straight from the fastest copy or
// climbing one rung at a time, joining a move of the same block into the same rung; and the
// completion of every move (reads and moves down alike). Contracts in tier_manager.h.
#include <fmt/format.h>

#include <utility>

#include "common/log.h"
#include "tiers/mover.h"

namespace kvtier::internal {

void Mover::Get(const BlockKey& key, Tier target, GetDone done) {
  const int t = TierIndex(target);
  if (t < 0 || t >= kNumTiers || !RungOf(t).client_readable) {
    done(absl::InvalidArgumentError(
        fmt::format("get: blocks are read from T1 or T0, not {}", TierName(target))));
    return;
  }
  if (Storage(t) == nullptr) {
    done(absl::FailedPreconditionError(
        fmt::format("get: this daemon runs without a {} tier", TierName(target))));
    return;
  }
  absl::StatusOr<BlockInfo> leased = index_.AcquireLease(key);
  if (!leased.ok()) {
    gets_missing_.fetch_add(1, std::memory_order_relaxed);
    done(leased.status());
    return;
  }
  Load(*leased, t, std::move(done));
}

void Mover::Load(const BlockInfo& info, int target, GetDone done) {
  const int source = Ladder::ReadSource(info.tiers, target);
  if (source == target) {  // the lease pins the copy from here on
    {
      absl::MutexLock lock(&mu_);
      ladder_->Touch(target, info.id);
      ++ladder_->counters(target).hits;
    }
    done(LeasedBlock{info.slots[static_cast<size_t>(target)], info.payload_bytes, TierOf(target)});
    return;
  }
  if (source == Ladder::kNone) {
    (void)Release(info.key);
    gets_missing_.fetch_add(1, std::memory_order_relaxed);
    done(absl::NotFoundError(fmt::format("block {} has no copy in any tier", info.key.ToHex())));
    return;
  }
  int step;
  {
    absl::MutexLock lock(&mu_);
    step = ladder_->NextStep(source, target);
    if (step != target) ++chains_;  // counted until the next step is under way
  }
  if (step == target) {
    StartRead(info, source, target, std::move(done));
    return;
  }
  // Climbing: into `step` under this Get's lease, then on from there.
  StartRead(info, source, step,
            [this, key = info.key, target,
             done = std::move(done)](absl::StatusOr<LeasedBlock> at_step) mutable {
              if (!at_step.ok()) {
                done(at_step.status());  // the failed step gave the lease back
              } else if (std::optional<BlockInfo> now = index_.Find(key)) {
                Load(*now, target, std::move(done));
              } else {
                done(absl::InternalError(
                    fmt::format("block {} left the index while leased", key.ToHex())));
              }
              absl::MutexLock lock(&mu_);
              --chains_;
              cv_.SignalAll();
            });
}

void Mover::StartRead(const BlockInfo& info, int from, int to, GetDone done) {
  const MoveKey id{info.key, to};
  std::optional<absl::StatusOr<LeasedBlock>> answer;  // set: `done` gets it now, no copy
  {
    absl::MutexLock lock(&mu_);
    // A copy that landed since this Get's lease was taken is in the index now (a completion
    // records it and leaves moves_ under one hold of mu_): use it, never copy twice.
    std::optional<BlockInfo> now = index_.Find(info.key);
    if (now && now->InTier(TierOf(to))) {
      ++ladder_->counters(to).hits;
      answer = LeasedBlock{now->slots[static_cast<size_t>(to)], now->payload_bytes, TierOf(to)};
    } else if (Move* joined = moves_.Find(info.key, to)) {
      joined->waiters.push_back(std::move(done));  // on its way into `to` already
      return;
    } else if (!now || !now->InTier(TierOf(from))) {  // cannot happen: the lease pins the copy
      answer = absl::InternalError(fmt::format("block {} lost its {} copy while leased",
                                               info.key.ToHex(), TierName(TierOf(from))));
    } else {
      Move move;
      move.for_read = true;
      move.from = from;
      move.src_slot = now->slots[static_cast<size_t>(from)];
      move.payload_bytes = now->payload_bytes;
      EnsureId(now->id);
      move.expected_checksum = checksum_[now->id];  // a key-addressed source reads by record
      move.namespace_id = namespace_[now->id];
      move.waiters.push_back(std::move(done));
      moves_.Add(id, std::move(move));
    }
  }
  if (answer) {
    if (!answer->ok()) (void)Release(info.key);
    done(std::move(*answer));
    return;
  }
  absl::StatusOr<SlotId> slot = AllocateIn(to);
  if (slot.ok()) {
    Issue(id, *slot);
  } else if (slot.status().code() == absl::StatusCode::kResourceExhausted) {
    // Full of blocks on their way down: the evictor starts this copy when a slot frees.
    absl::MutexLock lock(&mu_);
    moves_.waiting_for_room().push_back(id);
  } else {
    FailMove(id, slot.status());
  }
}

void Mover::Issue(const MoveKey& id, SlotId dst) {
  Move m;  // a copy of what the transfer needs (the entry may change once mu_ is released)
  {
    absl::MutexLock lock(&mu_);
    Move* move = moves_.Find(id.key, id.to);
    move->dst_slot = dst;
    m.for_read = move->for_read;
    m.from = move->from;
    m.src_slot = move->src_slot;
    m.payload_bytes = move->payload_bytes;
    m.expected_checksum = move->expected_checksum;
    m.namespace_id = move->namespace_id;
  }
  const TierMove what{m.for_read ? MoveKind::kPromotion : MoveKind::kDemotion, TierOf(m.from),
                      TierOf(id.to)};
  IoDone done = [this, id, what, started = std::chrono::steady_clock::now()](absl::Status s) {
    ReportMove(what, started, s);
    OnMoved(id, std::move(s));
  };
  BlockRecord record{id.key, m.namespace_id, m.payload_bytes, m.expected_checksum};
  if (HostTier* host = RungOf(id.to).host) {  // into host memory: the source tier reads
    Storage(m.from)->ReadRecord(m.src_slot, record, host->SlotData(dst), std::move(done));
    return;
  }
  HostTier* host = RungOf(m.from).host;
  if (host == nullptr) {  // a move down between two rungs that are not host memory
    IssueStaged(id, m, dst, record, std::move(done));
    return;
  }
  if (RungOf(id.to).persistent &&
      !PrepareForPersist(id, m, host->SlotData(m.src_slot), &record.checksum)) {
    done(absl::DataLossError("payload changed after commit; not persisted"));
    return;
  }
  Storage(id.to)->Write(dst, record, host->SlotData(m.src_slot), std::move(done));
}

void Mover::IssueStaged(const MoveKey& id, const Move& m, SlotId dst, const BlockRecord& record,
                        IoDone done) {
  std::byte* buffer = m.for_read ? nullptr : staging_.Take();
  if (buffer == nullptr) {  // reads climb through host memory (the ladder routes them so)
    done(absl::ResourceExhaustedError(fmt::format("no staging buffer for a move from {} to {}",
                                                  TierName(TierOf(m.from)),
                                                  TierName(TierOf(id.to)))));
    return;
  }
  auto written = [this, buffer, done](absl::Status s) {
    staging_.Give(buffer);
    done(std::move(s));
  };
  Storage(m.from)->ReadRecord(
      m.src_slot, record, buffer,
      [this, id, m, dst, record, buffer, written = std::move(written)](absl::Status s) mutable {
        BlockRecord out = record;
        if (s.ok() && RungOf(id.to).persistent &&
            !PrepareForPersist(id, m, buffer, &out.checksum)) {
          s = absl::DataLossError("payload changed after commit; not persisted");
        }
        if (!s.ok()) {
          written(std::move(s));
          return;
        }
        Storage(id.to)->Write(dst, out, buffer, std::move(written));
      });
}

void Mover::OnMoved(const MoveKey& id, absl::Status status) {
  std::vector<GetDone> waiters;
  absl::StatusOr<LeasedBlock> answer;
  {
    absl::MutexLock lock(&mu_);
    Move move = moves_.Take(id);
    work_pending_ = true;
    cv_.SignalAll();
    waiters = std::move(move.waiters);
    if (move.for_read) {
      answer = FinishReadLocked(id, move, status);
      if (answer.ok()) ladder_->counters(id.to).gets_promoted += waiters.size();
    } else {
      FinishMoveDownLocked(id, move, status);
      if (!status.ok()) {
        answer = status;
      } else {
        answer = absl::NotFoundError("no read waited");  // replaced below when one did
        std::optional<BlockInfo> now = index_.Find(id.key);
        if (now && now->InTier(TierOf(id.to))) {
          answer = LeasedBlock{now->slots[static_cast<size_t>(id.to)], now->payload_bytes,
                               TierOf(id.to)};
          ladder_->counters(id.to).gets_promoted += waiters.size();
        } else if (!waiters.empty()) {
          answer = absl::InternalError("block left the index while leased");
        }
      }
    }
  }
  if (!answer.ok() && !waiters.empty()) {
    // Full, or (T3) a block the store evicted meanwhile: normal outcomes, not worth a line each.
    const absl::StatusCode code = answer.status().code();
    if (code != absl::StatusCode::kResourceExhausted && code != absl::StatusCode::kNotFound) {
      KVTIER_LOG(kWarn, "tiers", "move of block {} into {} failed: {}", id.key.ToHex(),
                 TierName(TierOf(id.to)), std::string(answer.status().message()));
    }
    FailWaiters(id.key, std::move(waiters), answer.status());
    return;
  }
  KickIfAboveHigh(id.to);
  for (GetDone& done : waiters) done(*answer);
}

absl::StatusOr<LeasedBlock> Mover::FinishReadLocked(const MoveKey& id, Move& move,
                                                    absl::Status status) {
  const int from = move.from, to = id.to;
  std::optional<BlockInfo> info = index_.Find(id.key);  // present: the waiters hold leases
  if (!info && status.ok()) status = absl::InternalError("promoted block left the index");
  if (!status.ok()) {
    if (move.dst_slot != kNoSlot) FreeSlotLocked(to, move.dst_slot);
    ++ladder_->counters(to).promotion_failures;
    // A bad or unreadable persistent copy is gone for everyone (its tier frees or retires the
    // slot); a failed DMA leaves a memory copy, which may be leased and read in place.
    if (info && RungOf(from).persistent) {
      if (absl::StatusOr<uint32_t> slot = index_.DropTier(id.key, TierOf(from)); slot.ok()) {
        ladder_->Remove(from, info->id);
        FreeSlotLocked(from, *slot);
      }
    }
    return status;
  }
  LeasedBlock block{move.dst_slot, move.payload_bytes, TierOf(to)};
  if (index_.SetTier(id.key, TierOf(to), move.dst_slot).ok()) {
    EnterLocked(to, *info);
  } else {  // a copy got there meanwhile (a put): it serves, ours goes
    FreeSlotLocked(to, move.dst_slot);
    block.slot = info->slots[static_cast<size_t>(to)];
  }
  ladder_->Touch(from, info->id);
  ++ladder_->counters(from).promoted_out;
  return block;
}

void Mover::FailWaiters(const BlockKey& key, std::vector<GetDone> waiters,
                        const absl::Status& status) {
  for (GetDone& done : waiters) {
    (void)Release(key);
    done(status);
  }
}

void Mover::FailMove(const MoveKey& id, const absl::Status& status) {
  std::vector<GetDone> waiters;
  {
    absl::MutexLock lock(&mu_);
    Move move = moves_.Take(id);
    waiters = std::move(move.waiters);
    ++ladder_->counters(id.to).promotion_failures;
    cv_.SignalAll();
  }
  FailWaiters(id.key, std::move(waiters), status);
}

bool Mover::StartWaitingReads() {
  std::vector<std::pair<MoveKey, SlotId>> ready;
  {
    absl::MutexLock lock(&mu_);
    std::deque<MoveKey>& waiting = moves_.waiting_for_room();
    for (auto it = waiting.begin(); it != waiting.end();) {
      absl::StatusOr<SlotId> slot = Storage(it->to)->Allocate();  // O(1), no I/O
      if (!slot.ok()) {
        ++it;
        continue;
      }
      ready.emplace_back(*it, *slot);
      it = waiting.erase(it);
    }
  }
  for (const auto& [id, slot] : ready) Issue(id, slot);
  return !ready.empty();
}

void Mover::FailWaitingReads(int r) {
  std::vector<MoveKey> failed;
  {
    absl::MutexLock lock(&mu_);
    std::deque<MoveKey>& waiting = moves_.waiting_for_room();
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (it->to != r) {
        ++it;
        continue;
      }
      failed.push_back(*it);
      it = waiting.erase(it);
    }
  }
  for (const MoveKey& id : failed) {
    FailMove(id,
             absl::ResourceExhaustedError(fmt::format(
                 "{} is full of leased blocks: no room to copy into; retry", TierName(TierOf(r)))));
  }
}

}  // namespace kvtier::internal
