// The mover: the tier manager's (tier_manager.h) one generic mover over the ladder's rungs (T0,
// T1, T2; absent ones passed by). It asks the ladder (tiers/ladder.h) where a block goes and
// carries each move out with the tiers' own reads and writes, asynchronously: one path for every
// pair of rungs, one table of moves in flight (move_table.h), one read path from any rung to any
// other, joining concurrent reads of a block. Internal to the tier manager; contracts in
// tier_manager.h.
//
// A move between two rungs is one transfer through host memory: into the rung whose slots are
// host memory the source tier reads (T2 -> T1 by io_uring, T0 -> T1 by DMA, T3 -> T1 from the
// remote store); out of it the destination tier writes (T1 -> T2, T1 -> T0, T1 -> T3). Reads
// between two rungs that are not host memory climb through it (T2 -> T1 -> T0), as the ladder
// routes them. A move down between two such rungs (T2 -> T3) is staged: the source reads into a
// buffer of the mover's own (StagingBuffers), the destination writes from it. Before a payload is
// written into a persistent rung it is checked against the checksum given at commit and its
// padding zeroed.
//
// The shared rung (T3, shared_tier.h) is a rung like the others, key-addressed: its placeholder
// slots count this daemon's view of the store, frees forget (deferred, as a persistent rung's),
// and a failed read of it drops the copy (the store lost it). ExtendPrefix records what a probe
// found there.
//
// Invariants, all under mu_:
//  * A block id is resident in a rung of the ladder exactly when its copy there can be chosen as
//    a victim; a copy chosen for a move down, or pinned by a lease after it was chosen, is out of
//    the rung's policy until put back.
//  * Index Insert and Erase happen only under mu_, so an id is never reused while any structure
//    here still names it.
//  * A (block, destination) is in moves_ from the moment its move is decided until its
//    completion has been recorded. Every read waiting on a move holds a lease on the block, so
//    neither its source copy nor its index entry can go away meanwhile.
//
// Lock order: mu_, then a block index shard lock (index calls under mu_); never the reverse. No
// I/O, copy, hash, RocksDB call or user callback runs under mu_.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "index/block_index.h"
#include "tiers/host_tier.h"
#include "tiers/ladder.h"
#include "tiers/move_table.h"
#include "tiers/shared_tier.h"
#include "tiers/storage_tier.h"
#include "tiers/tier_manager_options.h"

namespace kvtier {

// What CommitPut publishes.
struct PutCommit {
  BlockKey key;
  uint64_t namespace_id = 0;
  uint32_t payload_bytes = 0;        // <= the tier's slot_bytes
  uint64_t checksum = 0;             // XXH3-64 of the payload as the writer wrote it; 0 = not given
  const BlockKey* parent = nullptr;  // the previous block of the sequence; null for the first
  Tier tier = Tier::kT1;             // the slot's tier: one clients write (T1, or T0)
  // A working slot published (protocol v3 work_publish): the writer goes on reading the slot, so
  // the stored block comes back leased to it, and a key already in `tier` leaves the slot the
  // writer's (kAlreadyPresent) instead of freeing it. A key cached only in other tiers gains this
  // copy. Without it (put_commit) a key cached anywhere frees the slot.
  bool working = false;
};
enum class CommitOutcome { kStored, kAlreadyPresent };

// Counters since start, in blocks: the manager's own, and the ladder's table per tier.
struct TierManagerStats {
  uint64_t puts_committed = 0, puts_already_present = 0, puts_refused_full = 0;
  uint64_t gets_missing = 0;      // Gets of a key absent, or in no tier
  uint64_t integrity_drops = 0;   // payloads that differed from the checksum given at commit
  uint64_t recovered_blocks = 0;  // found in T2 at start
  uint64_t moves_in_flight = 0;   // now
  // Blocks an eviction choice looked at (the victims and those it passed over): about one per
  // victim when leased blocks do not pile up at the front of the order (ChooseUnleasedLocked).
  uint64_t eviction_candidates = 0;
  uint64_t eviction_choices_skipped = 0;        // choices answered from a remembered "no victim"
  std::array<RungCounters, kNumTiers> tiers{};  // [Tier]
  const RungCounters& tier(Tier t) const { return tiers[static_cast<size_t>(TierIndex(t))]; }
};

namespace internal {

// One rung as the mover sees it: the tier and what kind of memory it is (hooks, not branches).
struct MoverRung {
  StorageTier* storage = nullptr;  // null: the daemon runs without this tier
  HostTier* host = nullptr;        // set for the rung whose slots are host memory (T1)
  // Its records survive a restart (T2): payloads are checked and padded before they are written,
  // and its frees (a metadata delete each) run on the evictor thread.
  bool persistent = false;
  uint32_t write_align = 0;     // bytes a write covers at a time (T2: 4096, O_DIRECT); 0: exact
  uint64_t capacity_slots = 0;  // for a persistent rung not open yet (its slots are known)
  // Clients read blocks where they lie in this tier's memory (T0, T1); Gets may target it.
  bool client_readable = false;
  // RungOptions::climb_to: the rung a read's copy from here enters first; -1: the next one up.
  int climb_to = -1;
  // A key-addressed rung shared with other daemons (T3): lookups probe it (ExtendPrefix).
  SharedTier* shared = nullptr;
};

// Buffers for staged moves (a move down between two rungs that are not host memory): slot_bytes
// each, 4096-aligned (T2 reads O_DIRECT into them). Kept for reuse up to `keep` (the mover keeps
// 8: 16 MiB of 2 MiB slots); more are made while more moves are in flight (at most
// max_demotions_in_flight per rung) and freed when they end. Thread-safe.
class StagingBuffers {
 public:
  StagingBuffers(size_t bytes, size_t keep) : bytes_(bytes), keep_(keep) {}
  ~StagingBuffers();
  std::byte* Take();  // null when out of memory
  void Give(std::byte* buffer);

 private:
  const size_t bytes_, keep_;
  absl::Mutex mu_;
  std::vector<std::byte*> free_ ABSL_GUARDED_BY(mu_);
};

class Mover {
 public:
  // `rungs[t]` is Tier t; `birth` is the host rung puts go to by default (T1), the one Flush
  // empties. Puts may name any client_readable rung.
  Mover(const TierManagerOptions& options, BlockIndex& index, std::vector<MoverRung> rungs,
        Tier birth);
  ~Mover();
  // Builds the ladder from `options`' policies and the rungs' slot counts.
  absl::Status Init();
  // Warm restart: a block T2 recovered (T2's Open visitor), before Attach.
  void AdoptRecovered(const BlockRecord& record, SlotId slot);
  // T2 is open (or there is none): its rung, then frees the slots of duplicate recovered records.
  void AttachPersistent(Tier tier, MoverRung rung);

  // TierManager's operations; contracts in tier_manager.h.
  absl::StatusOr<SlotId> AllocateForPut(Tier tier);
  // TierManager::AllocateManyForPut: appends up to `count` slots to `out`; the status says why
  // fewer came.
  absl::Status AllocateManyForPut(Tier tier, size_t count, std::vector<SlotId>& out);
  absl::Status AbortPut(Tier tier, SlotId slot);
  absl::StatusOr<CommitOutcome> Commit(const PutCommit& put, SlotId slot);
  void CountPutAlreadyPresent() { puts_already_present_.fetch_add(1, std::memory_order_relaxed); }
  void Get(const BlockKey& key, Tier target, GetDone done);
  // TierManager::ExtendPrefix (mover_shared.cc).
  size_t ExtendPrefix(absl::Span<const BlockKey> keys, size_t n, uint64_t namespace_id,
                      absl::Span<TierMask> tiers) ABSL_LOCKS_EXCLUDED(mu_);
  // TierManager::FindShared (mover_shared.cc).
  void FindShared(absl::Span<const BlockKey> keys, uint64_t namespace_id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Release(const BlockKey& key);
  absl::Status Drop(const BlockKey& key);
  TierManagerStats Stats() const;

  // The evictor thread: one unit of work per rung over its watermark (bottom-up), waiting reads
  // started, deferred frees done; false when there was nothing it could do now.
  bool EvictStep();
  // Waits until kicked, stopped, or `timeout_ms` passed. Marks the evictor idle meanwhile.
  void WaitForWork(int timeout_ms);
  void Stop();
  bool stopped() const { return stop_.load(std::memory_order_acquire); }
  // Waits until the evictor is idle and nothing is in flight (TierManager::Quiesce).
  void Quiesce();
  // Waits until nothing is in flight, then does deferred frees (shutdown, evictor stopped).
  void Drain();
  // TierManager::FlushT1 for the birth rung and the rungs above it (T0): they count as over their
  // watermarks while any block is in them, so the evictor's usual path moves every block it can
  // (T0 -> T1 -> T2); waits for that until `deadline`.
  bool Flush(std::chrono::steady_clock::time_point deadline);

 private:
  int birth() const { return static_cast<int>(birth_); }
  StorageTier* Storage(int r) const { return rungs_[static_cast<size_t>(r)].storage; }
  const MoverRung& RungOf(int r) const { return rungs_[static_cast<size_t>(r)]; }
  static Tier TierOf(int r) { return TierAt(r); }
  void Kick() ABSL_LOCKS_EXCLUDED(mu_);
  void KickIfAboveHigh(int r) ABSL_LOCKS_EXCLUDED(mu_);
  void ReportMove(const TierMove& move, std::chrono::steady_clock::time_point started,
                  const absl::Status& status) const;
  // Per-id data the ladder does not keep (mu_ held).
  void EnsureId(BlockId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnterLocked(int r, const BlockInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees `slot` of rung `r` now, or on the evictor thread for a persistent rung.
  void FreeSlotLocked(int r, SlotId slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `info`'s copy out of rung `r` after it was chosen: frees the slot, erases the block if
  // no copy is left, or puts it back in the rung's policy when a lease pinned it meanwhile. True
  // if it left. `dropped`: it left with no copy below (counted).
  bool LeaveLocked(int r, const BlockInfo& info, bool dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseIfUnusedLocked(const BlockKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A free slot in rung `r`, making room at once when a block can leave it without a move (a
  // clean victim, or any when no rung below admits); else ResourceExhausted, evictor woken.
  absl::StatusOr<SlotId> AllocateIn(int r) ABSL_LOCKS_EXCLUDED(mu_);
  // Appends up to `count` slots of rung r to `out` the same way: the free ones, then those the
  // victims it frees give up (FreeVictims, one hold of mu_ for all of them).
  absl::Status AllocateManyIn(int r, size_t count, std::vector<SlotId>& out)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Frees up to `want` slots of the full rung r at once (victims that can leave without a move),
  // under one hold of mu_; returns how many it freed.
  size_t FreeVictims(int r, size_t want) ABSL_LOCKS_EXCLUDED(mu_);
  // The ResourceExhausted of a full rung r whose blocks could not leave at once.
  absl::Status FullError(int r) const;
  // The policy's next victim in rung r among unleased blocks for which `also` holds. The leased
  // blocks it passed over are touched afterwards (a lease is a use), so the next choice does not
  // look at them again: a running engine's prefix stays leased for seconds and drifts to the LRU
  // front, and every allocation into its full T0 scanned all of it under mu_ (~0.2 ms a slot
  // with ~3,000 leased blocks on the H200 trace run).
  //
  // `none` remembers a choice that found no victim: until a block of r may have become one (its
  // lease ended, a copy landed below it, an unleased block entered r: Evictable) or kNoVictimTtl
  // passes, the next choice with the same `below_admits` answers nullopt at once instead of
  // looking at every block again. A refused work_take into a full T0 looked at all 4,096.
  struct NoVictim {
    uint64_t generation = 0;
    bool valid = false;
    bool below_admits = false;
    std::chrono::steady_clock::time_point at;
  };
  static constexpr std::chrono::milliseconds kNoVictimTtl{20};
  std::optional<BlockId> ChooseUnleasedLocked(int r, absl::FunctionRef<bool(const BlockInfo&)> also,
                                              NoVictim& none, bool below_admits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A block with copies in `tiers` may now be a victim where it was not: the rungs' choices look
  // again.
  void EvictableLocked(TierMask tiers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Admitting(int r) const;
  // The rung of a put into `tier`: FailedPrecondition unless clients write it and it runs.
  absl::StatusOr<int> PutRung(Tier tier, std::string_view op) const;
  // Commit under mu_: publishes `put` in rung `r` (slot `slot`); sets *free_slot when the slot
  // goes back (put_commit of a key present).
  absl::StatusOr<CommitOutcome> CommitLocked(const PutCommit& put, int r, SlotId slot,
                                             bool* free_slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Reads (mover_read.cc). `info` is leased by the Get.
  void Load(const BlockInfo& info, int target, GetDone done) ABSL_LOCKS_EXCLUDED(mu_);
  // One step of a read: a copy of the block from rung `from` into rung `to`, joining one in flight.
  void StartRead(const BlockInfo& info, int from, int to, GetDone done) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the transfer of a decided move whose destination slot is `dst`.
  void Issue(const MoveKey& id, SlotId dst) ABSL_LOCKS_EXCLUDED(mu_);
  // Issue of a move down between two rungs that are not host memory, through a staging buffer.
  void IssueStaged(const MoveKey& id, const Move& m, SlotId dst, const BlockRecord& record,
                   IoDone done) ABSL_LOCKS_EXCLUDED(mu_);
  // Records that the shared rung `r` holds `key` (a probe found it there): its tier mask after.
  absl::StatusOr<TierMask> AdoptShared(int r, const BlockKey& key, const BlockKey* parent,
                                       uint64_t namespace_id, uint32_t payload_bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnMoved(const MoveKey& id, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Evictor: starts reads that waited for a slot, as slots free; false if none started.
  bool StartWaitingReads() ABSL_LOCKS_EXCLUDED(mu_);
  // Evictor: rung `r` cannot make room (every block leased); its waiting reads fail.
  void FailWaitingReads(int r) ABSL_LOCKS_EXCLUDED(mu_);
  void FailMove(const MoveKey& id, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void FailWaiters(const BlockKey& key, std::vector<GetDone> waiters, const absl::Status& status);

  // Shedding (mover_shed.cc).
  bool ShouldShed(int r) ABSL_LOCKS_EXCLUDED(mu_);
  // Chooses one victim of `r` and carries out its fate; false when none could go now.
  bool ShedOnce(int r) ABSL_LOCKS_EXCLUDED(mu_);
  void StartMoveDown(const MoveKey& id) ABSL_LOCKS_EXCLUDED(mu_);
  // Checks a payload bound for a persistent rung against its commit checksum and zeroes its
  // padding; false (counted, logged) when it changed after commit.
  bool PrepareForPersist(const MoveKey& id, const Move& move, std::byte* src, uint64_t* checksum);
  // Records a finished move down (mu_ held): the copy below is published, the victim leaves.
  void FinishMoveDownLocked(const MoveKey& id, Move& move, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a finished read copy (mu_ held); returns the block to answer the waiters with.
  absl::StatusOr<LeasedBlock> FinishReadLocked(const MoveKey& id, Move& move, absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DoDeferredFrees() ABSL_LOCKS_EXCLUDED(mu_);
  // Write-through (TierManagerOptions::t0_write_through): starts copies down of blocks born in a
  // rung above the birth rung that have no copy below yet, while the rung below has free slots
  // and fewer than max_demotions_in_flight are under way; false if none started.
  bool WriteThroughStep() ABSL_LOCKS_EXCLUDED(mu_);
  bool WritesThrough(int r) const;
  // Records a finished write-through copy (mu_ held): the copy below is published, the source
  // stays (back in its rung's policy); a failed copy leaves only the source.
  void FinishWriteThroughLocked(const MoveKey& id, Move& move, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InFlightLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TierManagerOptions& options_;
  BlockIndex& index_;
  std::vector<MoverRung> rungs_;  // [Tier]
  const Tier birth_;
  std::array<double, kNumTiers> high_watermark_{};  // [Tier]; set by Init, then read-only
  StagingBuffers staging_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // evictor work, idleness and completions; with mu_
  std::unique_ptr<Ladder> ladder_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> checksum_ ABSL_GUARDED_BY(mu_);   // [id] as given at commit; 0 = none
  std::vector<uint64_t> namespace_ ABSL_GUARDED_BY(mu_);  // [id] namespace id for T2's record
  MoveTable moves_ ABSL_GUARDED_BY(mu_);
  uint64_t chains_ ABSL_GUARDED_BY(mu_) = 0;  // reads between two steps of a climb
  std::vector<std::pair<int, SlotId>> deferred_frees_ ABSL_GUARDED_BY(mu_);
  // Blocks born in a write-through rung, oldest first, to copy down (checked again when taken).
  std::deque<std::pair<int, BlockKey>> write_through_ ABSL_GUARDED_BY(mu_);
  bool work_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool evictor_idle_ ABSL_GUARDED_BY(mu_) = false;
  // Quiesce and Flush calls waiting now. In replay-exact mode the evictor sheds only for them, so
  // it never decides while a client holds a lease mid-operation.
  uint32_t waiters_for_idle_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> flushing_{false};  // Flush is emptying the birth rung
  std::atomic<uint64_t> puts_committed_{0}, puts_already_present_{0}, puts_refused_full_{0};
  std::atomic<uint64_t> gets_missing_{0}, integrity_drops_{0}, recovered_blocks_{0};
  std::atomic<uint64_t> eviction_candidates_{0}, eviction_choices_skipped_{0};
  std::vector<BlockId> passed_over_ ABSL_GUARDED_BY(mu_);  // ChooseUnleasedLocked's scratch
  // Per rung: moved by EvictableLocked; what a NoVictim is checked against.
  std::array<uint64_t, kNumTiers> evictable_generation_ ABSL_GUARDED_BY(mu_){};
  std::array<NoVictim, kNumTiers> no_victim_to_free_ ABSL_GUARDED_BY(mu_){};  // FreeVictims'
  std::array<NoVictim, kNumTiers> no_victim_to_shed_ ABSL_GUARDED_BY(mu_){};  // ShedOnce's
};

}  // namespace internal
}  // namespace kvtier
