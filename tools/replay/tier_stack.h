// A simulated tier stack for `kvtier replay`: the daemon's own ladder (tiers/ladder.h) over tiers
// that hold no data -- only which block is where -- so replay places and moves blocks by the
// daemon's rules, by construction. Moves complete at once; the ladder sheds after each one.
//
// Exact semantics (what the tests pin and the report counts):
//  * Residency. A block may be resident in several tiers at once (reads keep the lower copy).
//    ResidentMask(id) has bit t set while the block is in tier t. A reference hits in the highest
//    tier holding it (the lowest set bit).
//  * Reference(id) -- what the daemon does for one block of a request (the simulator calls it for
//    every block, last to first, after counting that request's hits):
//      - resident in the read tier: a read served in place (touch it there).
//      - resident elsewhere: a read. The copy comes from the fastest tier holding it, climbing one
//        tier at a time from below (or straight down from above), each step entering its tier
//        without asking admission and touching the copy it was made from; one block promoted out
//        of each source tier.
//      - absent everywhere: a put. The block is born in the put tier if its admission accepts it
//        (a refused block is not cached; the daemon's T1 admits all).
//  * Shedding. After every step the ladder sheds: tiers over their high watermark (default 1.0:
//    over capacity) evict, bottom-up, one victim each per round, down to their low watermark
//    (default 1.0), a round ending at a victim that moves down. A victim with a copy below just
//    leaves; otherwise the next tier receives it when its admission accepts (one block demoted),
//    else it is gone (one rejected, counted on the victim's tier). In leaf-first mode a tier
//    evicts only blocks with no resident child in it.
//  * Counters are in blocks; bytes are blocks x the block size (report.h).
//
// Thread-safety: none (one stack per simulation; a sweep runs one stack per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/status.h"
#include "index/admission_policy.h"
#include "index/eviction_policy.h"
#include "tiers/ladder.h"

namespace kvtier::replay {

inline constexpr BlockId kNoParent = kNoBlock;

struct TierConfig {
  std::string name = "T0";
  uint64_t capacity_blocks = 0;  // > 0
  // eviction.policy: a MakeEvictionPolicy name, or "opt" (Belady; single tier only, simulator.h).
  // eviction.capacity_blocks is overwritten with capacity_blocks.
  EvictionConfig eviction;
  AdmissionConfig admission;  // window_blocks 0 = the tier's capacity
  bool leaf_first = false;
  // Fractions of capacity, as the daemon's t<N>.high_watermark / low_watermark. 1.0 / 1.0: shed
  // one block whenever the tier is over its capacity.
  double high_watermark = 1.0;
  double low_watermark = 1.0;
  // The tier a read's copy from this one enters first (tiers/ladder.h RungOptions::climb_to); -1:
  // the next one up. A remote tier below NVMe names the host tier, as the daemon's T3 does.
  int climb_to = -1;
};

// Where the simulated client puts new blocks and reads blocks into (indexes into the stack).
struct StackShape {
  size_t put_tier = 0;
  size_t read_tier = 0;
};

// Per-tier counters, all in blocks.
struct TierCounters {
  uint64_t block_hits = 0;    // references whose highest copy was in this tier
  uint64_t prefix_hits = 0;   // of those, references inside their request's leading run of hits
  uint64_t tokens_saved = 0;  // prefill tokens of this tier's prefix hits, capped per request
  uint64_t promoted = 0;      // copies made from this tier for a read
  uint64_t demoted = 0;       // victims of this tier moved into the next tier
  uint64_t written = 0;       // new blocks born in this tier (not demotions/promotions)
  uint64_t evictions = 0;     // victims chosen by this tier's policy
  uint64_t rejected = 0;      // new blocks this tier refused, and its victims the next one refused
};

// InvalidArgument naming the tier and field: empty stack, > kMaxTiers, zero capacity, bad policy.
absl::Status ValidateTiers(const std::vector<TierConfig>& tiers);

class TierStack {
 public:
  // `ghost_keys[id]` names each block to the policies (Trace::hash_ids); it must outlive the stack.
  static absl::StatusOr<std::unique_ptr<TierStack>> Create(const std::vector<TierConfig>& tiers,
                                                           absl::Span<const uint64_t> ghost_keys,
                                                           StackShape shape = {});
  ~TierStack();
  TierStack(const TierStack&) = delete;
  TierStack& operator=(const TierStack&) = delete;

  // Precondition (this and Reference): id < ghost_keys.size().
  uint8_t ResidentMask(BlockId id) const { return ladder_->MaskUnchecked(id); }
  // Reads or puts `id` as described above. `parent` is the block before it in the request
  // (kNoParent for the first); leaf-first tiers use it. Inline: a hit in the read tier -- the
  // common case -- is one array read and one call.
  void Reference(BlockId id, BlockId parent) {
    if ((ladder_->MaskUnchecked(id) & read_bit_) != 0) {
      ladder_->TouchResident(read_, id);
      ++read_hits_;
    } else {
      ReferenceMiss(id, parent);
    }
  }

  // A hint, no observable effect: `ids` are about to be counted and referenced (the simulator's
  // next request). Starts loading their residency bytes and the read tier's policy state.
  void Prefetch(absl::Span<const BlockId> ids) const {
    if (prefetch_) ladder_->Prefetch(read_, ids);
  }

  size_t num_tiers() const { return static_cast<size_t>(ladder_->size()); }
  size_t Size(size_t tier) const { return ladder_->Size(static_cast<int>(tier)); }
  // The ladder's counters of tier `tier`, in the report's words.
  TierCounters counters(size_t tier) const;
  // The ladder's own table (tiers/ladder.h), for the differential test against the daemon.
  RungCounters rung_counters(size_t tier) const;

 private:
  explicit TierStack(absl::Span<const uint64_t> ghost_keys);
  void ReferenceMiss(BlockId id, BlockId parent);  // not resident in the read tier
  void Read(BlockId id, TierMask mask);            // a miss with a copy elsewhere (`mask`)
  // Sheds until no tier is over its watermarks (the daemon's evictor, with moves landing at once),
  // after a copy entered tier `entered`.
  void Settle(int entered) {
    if (ladder_->Below(entered) == Ladder::kNone) {  // replay's common case: a one-tier stack
      SettleBottom(entered);
    } else {
      SettleRounds(entered);
    }
  }
  // Settle when `r` is the bottom present tier. Its victims leave the ladder: FateOf is kDrop,
  // since no tier below can hold a copy (only present tiers are entered) or receive it. So no
  // other tier changes, Settle's rounds are this one loop, and a victim's residency bits need not
  // be read again -- the case of every miss in a one-tier stack.
  [[gnu::always_inline]] void SettleBottom(int r) {
    while (ladder_->ShouldShed(r, ladder_->Size(r))) {
      if (!ladder_->ChooseAny(r)) return;
      ++ladder_->counters(r).dropped;
    }
  }
  void SettleRounds(int entered);  // Settle in general
  // Carries out the fate of `v`, a victim just chosen in tier `r`.
  [[gnu::always_inline]] inline VictimFate ShedVictim(int r, BlockId v);
  // ghost_keys_[id] when tier `r`'s policies read it, else 0 (spares a cold read per miss).
  uint64_t GhostKey(int r, BlockId id) const {
    return ladder_->ReadsGhostKeys(r) ? ghost_keys_[id] : 0;
  }

  absl::Span<const uint64_t> ghost_keys_;
  std::unique_ptr<Ladder> ladder_;
  int put_ = 0, read_ = 0;
  TierMask read_bit_ = 0;       // 1 << read_
  bool put_is_bottom_ = false;  // no present tier below the put tier
  uint64_t read_hits_ = 0;      // reads served in place (the ladder's `hits` of the read tier)
  // Prefetch hints only pay when the per-block arrays outgrow the caches; below this many blocks
  // they would only cost instructions.
  static constexpr size_t kPrefetchMinBlocks = size_t{1} << 20;
  bool prefetch_ = false;
};

}  // namespace kvtier::replay
