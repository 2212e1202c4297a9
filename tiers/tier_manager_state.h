// Internal to the tier manager (tier_manager.h): the policy bookkeeping and the moves in flight,
// behind one mutex. Not for use elsewhere.
//
// Invariants, all under mu_:
//  * A block id is in a tier's eviction policy and leaf tracker exactly when its resident_ bit for
//    that tier is set. A block whose copy is being demoted, or that a lease pinned after it was
//    chosen, is out of T1's policy until it is put back.
//  * Index Insert and Erase happen only under mu_, so an id is never reused while any structure
//    here still names it.
//  * A key is in demotions_ from the moment its T1 copy is chosen for a T2 write until the write's
//    completion has settled it; in promotions_ from the first Get that needs it in T1 until the
//    T2 (or T0) read's completion. Every Get waiting in promotions_ holds a lease on the block, so
//    neither its source copy nor its index entry can go away meanwhile.
//  * Likewise for T0: t0_promotions_ holds a key from the first Get that needs it in T0 until the
//    T1 -> T0 copy completes (its waiters' leases pin the T1 source); t0_demotions_ from the moment
//    its T0 copy is chosen for a T0 -> T1 copy until that copy's completion.
//
// Lock order: mu_, then a block index shard lock (index calls under mu_); never the reverse. No
// I/O, copy, hash, RocksDB call or user callback runs under mu_.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "index/admission_policy.h"
#include "index/eviction_policy.h"
#include "index/leaf_tracker.h"
#include "tiers/device_tier.h"
#include "tiers/host_tier.h"
#include "tiers/nvme_tier.h"
#include "tiers/tier_manager.h"

namespace kvtier::internal {

// One tier's policies. Guarded by TierManagerState::mu_.
struct TierPolicies {
  TierPolicyOptions options;
  std::unique_ptr<EvictionPolicy> eviction;
  std::unique_ptr<AdmissionPolicy> admission;
  LeafTracker leaves;
  bool draining = false;  // went above the high watermark; evicting down to the low one
};

struct Counters {
  std::atomic<uint64_t> puts_committed{0}, puts_already_present{0}, puts_refused_full{0};
  std::atomic<uint64_t> gets_t1{0}, gets_promoted{0}, gets_missing{0}, promotion_failures{0};
  std::atomic<uint64_t> t1_evictions{0}, t1_clean_evictions{0}, demotions{0};
  std::atomic<uint64_t> demotion_failures{0}, demotions_rejected{0}, t1_dropped{0};
  std::atomic<uint64_t> t2_evictions{0}, integrity_drops{0}, recovered_blocks{0};
  std::atomic<uint64_t> gets_t0{0}, gets_promoted_t0{0}, t0_promotion_failures{0};
  std::atomic<uint64_t> t0_evictions{0}, t0_clean_evictions{0}, t0_demotions{0};
  std::atomic<uint64_t> t0_demotion_failures{0};
};

class TierManagerState {
 public:
  // `t0` may be null (no GPU tier).
  TierManagerState(const TierManagerOptions& options, BlockIndex& index, HostTier& t1,
                   DeviceTier* t0);
  // Builds the policies; `t2_slots` is T2's capacity in slots (0 without T2).
  absl::Status Init(uint64_t t2_slots);
  // Warm restart: a block T2 recovered (T2's Open visitor). Before AttachT2.
  void AdoptRecovered(const BlockRecord& record, SlotId slot);
  // T2 is open: frees the slots of duplicate recovered records. Null: no T2.
  void AttachT2(NvmeTier* t2);

  // TierManager's operations; contracts in tier_manager.h.
  absl::StatusOr<SlotId> AllocateForPut();
  absl::StatusOr<CommitOutcome> Commit(const PutCommit& put, SlotId slot);
  void CountPutAlreadyPresent() {
    counters_.puts_already_present.fetch_add(1, std::memory_order_relaxed);
  }
  void Get(const BlockKey& key, Tier target, GetDone done);
  absl::Status Release(const BlockKey& key);
  absl::Status Drop(const BlockKey& key);
  TierManagerStats Stats() const;

  // The evictor thread: does one unit of work (a T2 victim, a T1 victim, deferred frees); false
  // when there was nothing it could do now.
  bool EvictStep();
  // Waits until kicked, stopped, or `timeout_ms` passed. Marks the evictor idle meanwhile.
  void WaitForWork(int timeout_ms);
  void Stop();
  bool stopped() const { return stop_.load(std::memory_order_acquire); }
  // Waits until the evictor is idle and nothing is in flight (see TierManager::Quiesce).
  void Quiesce();
  // Waits until nothing is in flight, then frees deferred T2 slots (shutdown, evictor stopped).
  void Drain();
  // See TierManager::FlushT1: T1 counts as over its watermark while any block is in it, so the
  // evictor's usual path moves every block it can; waits for that until `deadline`.
  bool FlushT1(std::chrono::steady_clock::time_point deadline);

 private:
  // Residency bookkeeping (mu_ held).
  void EnsureId(BlockId id);
  void AddResident(Tier tier, BlockId id, uint64_t ghost_key, BlockId parent);
  void RemoveResident(Tier tier, BlockId id, bool chosen_by_policy);
  TierPolicies& Policies(Tier tier) { return policies_[static_cast<int>(tier)]; }
  // The tier's storage; null for a tier this manager runs without.
  StorageTier* Storage(Tier tier) const;
  // The policy's next victim that is not leased; with `only_without_io`, one that can leave
  // without a write (already in the tier below: T1 for T0, T2 for T1).
  std::optional<BlockId> PickVictim(Tier tier, bool only_without_io);
  // Takes `key`'s copy out of T1 after it was chosen: frees the slot, erases the block if it has
  // no copy left, or puts it back in T1's policy when a lease pinned it meanwhile. True if it left.
  bool LeaveT1Locked(const BlockInfo& info, bool count_as_dropped);
  void EraseIfUnusedLocked(const BlockKey& key);
  void KickIfAboveHigh(Tier tier);
  // A free T1 slot, making room at once if a block can leave without I/O; else ResourceExhausted
  // with the evictor woken.
  absl::StatusOr<SlotId> AllocateT1();
  void Kick();
  // A finished move for options_.on_move, when set and `status` (the transfer's own) is OK. Called
  // first thing in each completion, before mu_ is taken.
  void ReportMove(const TierMove& move, std::chrono::steady_clock::time_point started,
                  const absl::Status& status) const;

  // Promotion into T1 (tier_manager_state.cc). `info` is leased by the Get.
  void LoadIntoT1(const BlockInfo& info, GetDone done);
  // From T0 when it has the block (a faster read than T2), else from T2.
  void StartPromotion(const BlockInfo& info, GetDone done);
  void IssuePromotionRead(const BlockKey& key, Tier source, SlotId source_slot, SlotId t1_slot);
  // Evictor: starts promotions that waited for a T1 slot, as slots free; false if none started.
  bool StartWaitingPromotions();
  // Evictor: T1 cannot make room (every block leased); the waiting promotions fail.
  void FailWaitingPromotions();
  void FailPromotion(const BlockKey& key, const absl::Status& status);
  void OnPromoted(const BlockKey& key, SlotId t1_slot, absl::Status status);
  void FailWaiters(const BlockKey& key, std::vector<GetDone> waiters, const absl::Status& status);

  // Eviction and demotion (tier_manager_evict.cc).
  bool EvictT1Once();
  bool EvictT2Once();
  bool OverWatermark(Tier tier);
  void StartDemotion(const BlockInfo& info);
  absl::StatusOr<SlotId> AllocateT2();
  void OnDemoted(const BlockKey& key, SlotId t2_slot, const absl::Status& status);
  void AbandonDemotion(const BlockKey& key, bool rejected);
  bool FreeDeferredT2Slots();

  // T0 (tier_manager_t0.cc): promotion T1 -> T0, eviction, demotion T0 -> T1.
  void LoadIntoT0(const BlockInfo& info, GetDone done);  // `info` is leased by the Get
  // The T0 step of a T2 -> T1 -> T0 Get, once the block is in T1 (or the T1 step failed).
  void ContinueIntoT0(const BlockKey& key, absl::StatusOr<LeasedBlock> in_t1, GetDone done);
  void StartT0Promotion(const BlockInfo& info, GetDone done);
  void OnPromotedToT0(const BlockKey& key, SlotId t0_slot, absl::Status status);
  // A free T0 slot, making room at once if a block can leave T0 without a copy.
  absl::StatusOr<SlotId> AllocateT0();
  // Like LeaveT1Locked, for T0: frees the slot unless a lease pinned the block meanwhile.
  bool LeaveT0Locked(const BlockInfo& info);
  bool EvictT0Once();
  // Copies a chosen T0 victim down into a T1 slot; false when T1 had no room now (the victim went
  // back into T0's policy: no progress).
  bool StartT0Demotion(const BlockInfo& info);
  void OnT0Demoted(const BlockKey& key, const absl::Status& status);

  struct Demotion {
    SlotId t1_slot = kNoSlot;
    bool dropped = false;  // Drop removed the block meanwhile: free both slots at completion
    uint64_t expected_checksum = 0;  // as given at commit; 0 = none
    uint64_t namespace_id = 0;
  };
  struct Promotion {
    uint32_t payload_bytes = 0;
    Tier source = Tier::kT2;  // read from T2 or, when the block has a T0 copy, from T0
    SlotId source_slot = kNoSlot;
    std::vector<GetDone> waiters;  // each holds a lease on the block
  };
  struct T0Promotion {
    uint32_t payload_bytes = 0;
    std::vector<GetDone> waiters;  // each holds a lease on the block
  };
  struct T0Demotion {
    SlotId t0_slot = kNoSlot;
    SlotId t1_slot = kNoSlot;  // kNoSlot until StartT0Demotion has one
    bool dropped = false;      // Drop removed the block meanwhile: free both slots at completion
  };

  const TierManagerOptions& options_;
  BlockIndex& index_;
  HostTier& t1_;
  DeviceTier* const t0_;
  NvmeTier* t2_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // evictor work, idleness and completions; with mu_
  std::array<TierPolicies, kNumTiers> policies_;         // [T0, T1, T2]
  std::vector<uint8_t> resident_;                        // [id] TierBit(t) set: in tier t's policy
  std::vector<uint64_t> checksum_;                       // [id] as given at commit; 0 = none
  std::vector<uint64_t> namespace_;                      // [id] namespace id for T2's record
  absl::flat_hash_map<BlockKey, Demotion> demotions_;    // T1 -> T2 writes in flight
  absl::flat_hash_map<BlockKey, Promotion> promotions_;  // T2 -> T1 reads in flight or waiting
  absl::flat_hash_map<BlockKey, T0Promotion> t0_promotions_;  // T1 -> T0 copies in flight
  absl::flat_hash_map<BlockKey, T0Demotion> t0_demotions_;    // T0 -> T1 copies in flight
  uint64_t t0_chains_ = 0;                 // T0 Gets in their T2 -> T1 step (LoadIntoT0)
  std::deque<BlockKey> waiting_for_t1_;    // promotions waiting for a free T1 slot, oldest first
  std::vector<SlotId> deferred_t2_frees_;  // freed by the evictor (a RocksDB delete each)
  bool work_pending_ = false;
  bool evictor_idle_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> flushing_{false};  // FlushT1 is emptying T1
  Counters counters_;
};

}  // namespace kvtier::internal
