// TierManager: the daemon's memory. It owns the block index and the tiers (T1 host, optional T0
// GPU and T2 NVMe), and moves blocks between them with one generic mover (tiers/mover.h) that
// follows the ladder's rules (tiers/ladder.h, shared with `kvtier replay`) (DESIGN.md "Data flow",
// "Demotion and eviction"):
//
//  * Store. AllocateForPut hands out a T1 slot; the writer fills it; CommitPut publishes it to the
//    index (or, when the key is already present, frees the slot: a prefix is stored once).
//  * Load. Get takes a lease and makes sure the block has a T1 copy, promoting it from T2 by
//    io_uring straight into a T1 slot when needed (one DMA through T1's registered buffers); the
//    lower copy is kept, so evicting the block from T1 again costs no write. Release gives the
//    lease back. A Get that targets T0 makes sure of a T0 copy the same way: T1 -> T0 by DMA (T2
//    -> T1 -> T0 for a block only in T2), one transfer per block however many Gets wait for it,
//    keeping the T1 copy. A T1 Get of a block whose only fast copy is in T0 copies it T0 -> T1.
//  * Eviction. Each tier has a high and a low watermark. When a tier fills past its high watermark
//    the evictor thread sheds it (tiers bottom-up) until occupancy is back at the low watermark,
//    by the ladder's rules: a victim with a copy in a lower tier just leaves; otherwise the next
//    tier down (T0 -> T1, T1 -> T2) receives it when it admits it (T2's admission policy; T1
//    admits all), and the victim is freed only once its copy there is published; otherwise it is
//    dropped. T2 victims are deleted. A victim whose lower tier is full of leased or moving
//    blocks waits, back in its policy. Leased blocks are never evicted, in any tier. In
//    leaf-first mode a tier evicts only blocks with no child resident in it, falling back to any
//    block when none is a leaf.
//  * Moves while reading. A block being demoted stays in T1, readable, until its T2 copy is
//    committed; if it was leased meanwhile it stays in T1 (now clean). Reads of different blocks
//    never wait for each other: the manager's lock covers only policy bookkeeping, never a copy or
//    an I/O.
//
// Integrity. Before a T1 block is written to T2 its payload is hashed (XXH3-64); when the writer
// gave a checksum at CommitPut and it differs, T1 was changed after commit: the block is dropped
// and counted, never persisted. T2 verifies every read; a block that fails is dropped from T2 (and
// the index when it has no other copy), counted, and its Get gets DataLoss.
//
// The remote tier (T3, TierManagerOptions::t3). The ladder's last rung, key-addressed and shared
// with the other daemons of a fleet: T2's victims (T1's without a T2) are written there when its
// admission takes them; a Get of a block whose only copy is there promotes it straight into T1
// (and on into T0 for a T0 Get), joining concurrent Gets like any promotion; a copy the store
// lost meanwhile is a plain miss (NotFound) and is forgotten. ExtendPrefix asks it about keys
// past a lookup's local prefix. While the store is unavailable the rung takes nothing and its
// reads fail fast; T0-T2 serve as before.
//
// Warm restart. Create opens T2 and puts every block T2 recovered into the index (in T2 only).
//
// Thread-safety: every method may be called from any thread. Completion callbacks (GetDone) run on
// the caller's thread when the block is already in the target tier (or on an argument error),
// else on a T2 or T0 completion thread; they must not block, and may call back into the manager.
// TierManagerOptions::on_move, when set, hears of every finished promotion and demotion (with its
// duration) on the thread completing it, before the Gets waiting for it are answered.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "tiers/device_tier.h"
#include "tiers/host_tier.h"
#include "tiers/mover.h"
#include "tiers/nvme_tier.h"
#include "tiers/tier_manager_options.h"

namespace kvtier {

class TierManager {
 public:
  // Validates `options`, builds the index, creates T1, opens T2 (registering T1's segment with it
  // and recovering its blocks into the index) and starts the evictor thread. Errors name the
  // setting (see TierManagerOptions::Validate) or say which tier could not start.
  static absl::StatusOr<std::unique_ptr<TierManager>> Create(const TierManagerOptions& options);
  // Stops the evictor and waits for demotions and promotions in flight (their callbacks run), then
  // closes T2 (its records stay on disk) and T1.
  ~TierManager();
  TierManager(const TierManager&) = delete;
  TierManager& operator=(const TierManager&) = delete;

  BlockIndex& index() const { return *index_; }
  HostTier& t1() const { return *t1_; }
  NvmeTier* t2() const { return t2_.get(); }            // null without a T2
  DeviceTier* t0() const { return t0_.get(); }          // null without a T0
  SharedTier* t3() const { return options_.t3.get(); }  // null without a remote tier

  // --- Store ---
  // A free slot of `tier` (T1, or T0 when the daemon runs one) for the caller to fill, owned by
  // the caller until CommitPut or AbortPut: a put_begin's slot, or a working slot (protocol v3).
  // Never waits: when the tier is full and no block can leave it at once (clean or droppable, not
  // leased) the answer is ResourceExhausted, the evictor has been woken, and the caller retries
  // later. InvalidArgument for T2, FailedPrecondition for T0 without a T0.
  absl::StatusOr<SlotId> AllocateForPut(Tier tier = Tier::kT1);
  // Up to `count` slots as AllocateForPut hands them out, choosing the victims a full tier must
  // give up under one hold of the mover's lock rather than two per slot (a working-slot take of
  // many slots into a full T0, against the mover's own work). `slots` holds what could be had
  // now; `status` is OK when all `count` came, else AllocateForPut's error for the first that did
  // not (ResourceExhausted: retry later).
  struct Allocation {
    std::vector<SlotId> slots;
    absl::Status status;
  };
  Allocation AllocateManyForPut(Tier tier, size_t count);
  // Gives back a slot from AllocateForPut that will not be committed. Errors as AllocateForPut's,
  // and InvalidArgument for a slot out of range.
  absl::Status AbortPut(SlotId slot, Tier tier = Tier::kT1);
  // Publishes the block in `slot` of put.tier. kAlreadyPresent: the key was there with a copy
  // somewhere; the slot was freed (for put.working: the key was in put.tier already, and the slot
  // is still the caller's; a key only in other tiers gains this copy, kStored). With put.working a
  // kStored block comes back leased to the caller (Release it). InvalidArgument for a payload
  // larger than a slot or a bad slot (the slot is then still the caller's). ResourceExhausted
  // when the index is full (the slot too).
  absl::StatusOr<CommitOutcome> CommitPut(const PutCommit& put, SlotId slot);
  // Counts a put the caller skipped before allocating, because the key was present (put_begin
  // found it), in Stats().puts_already_present beside the ones CommitPut found.
  void CountPutAlreadyPresent();

  // --- Load ---
  // Leases `key` and calls `done` once it has a T1 copy, with the slot; the lease is the caller's
  // until Release. On error no lease is held: NotFound (absent, or in no tier), DataLoss (its only
  // copy failed its checksum and is gone), ResourceExhausted (no T1 slot free now; retry), or the
  // T2 read error.
  void Get(const BlockKey& key, GetDone done);
  // Get with a target tier: Tier::kT1 is the Get above; Tier::kT0 leases `key` and calls `done`
  // once it has a T0 copy (LeasedBlock::tier == kT0), promoting it T1 -> T0 (or T2 -> T1 -> T0).
  // Errors as above, plus FailedPrecondition for T0 without a T0, InvalidArgument for T2, and
  // ResourceExhausted when T0 is full of leased blocks or blocks on their way to T1 (retry).
  void Get(const BlockKey& key, Tier target, GetDone done);
  // The rest of a lookup (Service::Lookup) once the index found the prefix keys[0, n): asks T3
  // which of the next keys it holds (at most its max_probe_keys, waiting at most its
  // probe_budget), records those in the index as T3 copies of `namespace_id` (forgetting older
  // remote blocks when this daemon's view of the store is full), and returns the new prefix
  // length, with tiers[i] set for each added block (a block the store lacks but a local tier
  // holds continues the prefix). Returns n without a T3, or when the store does not answer.
  // Precondition: tiers.size() >= keys.size().
  size_t ExtendPrefix(absl::Span<const BlockKey> keys, size_t n, uint64_t namespace_id,
                      absl::Span<TierMask> tiers);
  // Before a Get of `keys`: those no tier holds are asked of T3 (one probe within its budget, at
  // most its max_probe_keys) and the ones it holds are recorded as T3 copies, so the Get promotes
  // them; a get needs no lookup before it. No round trip when every key is known, or without T3.
  void FindShared(absl::Span<const BlockKey> keys, uint64_t namespace_id);
  // Gives back one lease taken by a successful Get. A block left in no tier is erased with its
  // last lease. Errors: NotFound, FailedPrecondition (no lease held).
  absl::Status Release(const BlockKey& key);
  // Removes `key` from every tier (a client's drop). FailedPrecondition while leased, NotFound if
  // absent. A block being demoted is removed at once; its T1 slot is freed when the write ends.
  absl::Status Drop(const BlockKey& key);

  // Blocks until the evictor has nothing to do and no demotion or promotion is in flight (tests,
  // benchmarks, shutdown).
  void Quiesce();
  // For a clean stop: empties T1 (and T0 above it: a block born in T0 is copied down to T1 and on)
  // through the evictor's usual path, as if they were over their high watermarks until nothing in
  // them can leave. A block with a T2 copy just leaves; one without is
  // offered to T2's admission policy and written (T2 evicting its own victims for room, as for
  // any demotion) or, refused, dropped. Leased blocks and open puts stay. Returns true once no
  // more can leave and every write has settled, false at `deadline` (writes in flight then finish
  // in the destructor). Afterwards T1 sheds by its watermarks again. Without a T2 it drops T1's
  // blocks: callers flush only when there is a T2.
  bool FlushT1(std::chrono::steady_clock::time_point deadline);
  TierManagerStats Stats() const;

 private:
  explicit TierManager(const TierManagerOptions& options);
  absl::Status Start();
  void EvictorLoop();

  const TierManagerOptions options_;
  // Declared in destruction order's reverse: the state (policies, in-flight moves) refers to all
  // of them; T2 registered T1's memory and T0 copies from and to it, so both go before T1.
  std::unique_ptr<BlockIndex> index_;
  std::unique_ptr<HostTier> t1_;
  std::unique_ptr<DeviceTier> t0_;
  std::unique_ptr<NvmeTier> t2_;
  std::unique_ptr<internal::Mover> state_;
  std::thread evictor_;
};

}  // namespace kvtier
