// TierManager: the daemon's memory. It owns the block index and the tiers (T1 host, optional T0
// GPU and T2 NVMe), and moves blocks between them (DESIGN.md "Data flow", "Demotion and
// eviction"):
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
//    the evictor thread asks the tier's policy (index/) for victims until occupancy is back at the
//    low watermark. A T1 victim already in T2 (clean) just leaves T1; otherwise it is offered to
//    T2's admission policy and, when admitted, written to T2 and only then freed from T1; otherwise
//    it is dropped. T2 victims are deleted. A T0 victim that still has its T1 copy just leaves T0;
//    otherwise it is copied T0 -> T1 (into a slot T1 can give without waiting; else it waits in
//    T0, or leaves if T2 holds it) and only then freed from T0. Leased blocks are never evicted,
//    in any tier. In leaf-first mode a tier evicts only blocks with no child resident in it,
//    falling back to any block when none is a leaf.
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
#include "tiers/nvme_tier.h"
#include "tiers/tier_manager_options.h"

namespace kvtier {

namespace internal {
class TierManagerState;
}

// A block a Get leased, ready in the Get's target tier: its bytes are
// t1().SlotData(slot)[0, payload_bytes) for T1, device bytes t0()->SlotData(slot)[0,
// payload_bytes) for T0.
struct LeasedBlock {
  SlotId slot = kNoSlot;
  uint32_t payload_bytes = 0;
  Tier tier = Tier::kT1;
};
using GetDone = std::function<void(absl::StatusOr<LeasedBlock>)>;

// What CommitPut publishes.
struct PutCommit {
  BlockKey key;
  uint64_t namespace_id = 0;
  uint32_t payload_bytes = 0;        // <= t1 slot_bytes
  uint64_t checksum = 0;             // XXH3-64 of the payload as the writer wrote it; 0 = not given
  const BlockKey* parent = nullptr;  // the previous block of the sequence; null for the first
};
enum class CommitOutcome { kStored, kAlreadyPresent };

// Counters since start (blocks unless named _bytes).
struct TierManagerStats {
  uint64_t puts_committed = 0, puts_already_present = 0, puts_refused_full = 0;
  uint64_t gets_t1 = 0, gets_promoted = 0, gets_missing = 0, promotion_failures = 0;
  uint64_t t1_evictions = 0;         // victims chosen by T1's policy
  uint64_t t1_clean_evictions = 0;   // of those, already in T2: left T1 with no write
  uint64_t demotions = 0;            // written to T2 and committed
  uint64_t demotion_failures = 0;    // T2 write failed; the block was dropped
  uint64_t demotions_rejected = 0;   // T2's admission said no, or T2 was not admitting
  uint64_t t1_dropped = 0;           // victims that left T1 without a lower copy (gone)
  uint64_t t2_evictions = 0;         // victims chosen by T2's policy (deleted)
  uint64_t integrity_drops = 0;      // T1 payload differed from the checksum given at commit
  uint64_t demotions_in_flight = 0;  // now
  uint64_t recovered_blocks = 0;     // found in T2 at start
  // T0 (all 0 without it). A T0 Get that had to promote from T2 also counts in gets_promoted.
  uint64_t gets_t0 = 0;           // T0 Gets served by a T0 copy already there
  uint64_t gets_promoted_t0 = 0;  // T0 Gets served by a T1 -> T0 copy
  uint64_t t0_promotion_failures = 0;
  uint64_t t0_evictions = 0;          // victims chosen by T0's policy
  uint64_t t0_clean_evictions = 0;    // of those, still in T1 (or in T2 when T1 had no room)
  uint64_t t0_demotions = 0;          // copied T0 -> T1, then freed from T0
  uint64_t t0_demotion_failures = 0;  // the T0 -> T1 copy failed; the T0 copy was dropped
};

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
  NvmeTier* t2() const { return t2_.get(); }    // null without a T2
  DeviceTier* t0() const { return t0_.get(); }  // null without a T0

  // --- Store ---
  // A free T1 slot for the caller to fill, owned by the caller until CommitPut or AbortPut. Never
  // waits: when T1 is full and no block can leave it at once (clean or droppable, not leased) the
  // answer is ResourceExhausted, the evictor has been woken, and the caller retries later.
  absl::StatusOr<SlotId> AllocateForPut();
  // Gives back a slot from AllocateForPut that will not be committed.
  void AbortPut(SlotId slot);
  // Publishes the block in `slot`. kAlreadyPresent: the key was there with a copy somewhere; the
  // slot was freed. InvalidArgument for a payload larger than a slot or a bad slot (the slot is
  // then still the caller's). ResourceExhausted when the index is full (the slot too).
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
  // Gives back one lease taken by a successful Get. A block left in no tier is erased with its
  // last lease. Errors: NotFound, FailedPrecondition (no lease held).
  absl::Status Release(const BlockKey& key);
  // Removes `key` from every tier (a client's drop). FailedPrecondition while leased, NotFound if
  // absent. A block being demoted is removed at once; its T1 slot is freed when the write ends.
  absl::Status Drop(const BlockKey& key);

  // Blocks until the evictor has nothing to do and no demotion or promotion is in flight (tests,
  // benchmarks, shutdown).
  void Quiesce();
  // For a clean stop: empties T1 through the evictor's usual path, as if T1 were over its high
  // watermark until nothing in it can leave. A block with a T2 copy just leaves; one without is
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
  std::unique_ptr<internal::TierManagerState> state_;
  std::thread evictor_;
};

}  // namespace kvtier
