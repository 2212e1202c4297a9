// The ladder (DESIGN.md "Tiers", "Demotion and eviction"): the placement and movement rules of an
// ordered list of rungs, fastest first (the daemon's T0 GPU HBM, T1 host DRAM, T2 NVMe; replay's
// simulated tiers), as decisions over which rung holds a copy of which block. No data, no I/O, no
// locks: the daemon's mover (tiers/mover.h) asks it under its lock and carries each move out with
// the tiers' own reads and writes; `kvtier replay` asks it and applies each move at once. So the
// rules below are one piece of code, and an offline hit ratio is the one the daemon gets.
//
// The rules:
//  * Birth. A new block enters one rung (the daemon's puts: T1) if that rung's admission accepts it
//    (AdmitBirth); a refused block is not cached. The daemon runs T1 with admission "all" (its
//    config refuses anything else: it has no way yet to tell a client its put was not admitted),
//    so there every put is born; replay may model a tier that filters new blocks.
//  * Reads. A read for rung `target` is served by the copy there (Touch). Otherwise the source is
//    the fastest rung holding a copy (ReadSource); the copy climbs one present rung at a time from
//    below (T2 -> T1 -> T0), or comes straight down from above (T0 -> T1), each step entering the
//    next rung without admission (the read proves reuse) and touching the copy it was made from.
//    A rung may name the rung its reads' copies climb into first (RungOptions::climb_to: the
//    remote rung's copies go straight to T1, never through T2). Lower copies are kept, so a block
//    that leaves a rung again costs no write.
//  * Shedding. A rung sheds while it is above its high watermark, until it is at or below its low
//    one (ShouldShed; hysteresis). Rungs shed bottom-up (ShedOrder), one victim per rung per step,
//    so room below is made before victims are pushed into it. A victim is chosen by the rung's
//    policy among the blocks the caller allows (the daemon: not leased); in leaf-first mode only
//    among blocks with no child resident in the rung, falling back to any when none is a leaf.
//  * A victim's fate (FateOf): a copy in any lower rung -> it just leaves (clean, no write); else
//    the next present rung below, when admitting and its admission accepts, receives it (moved
//    down; that rung may shed in turn); else it is dropped from the ladder.
//
// Block ids are the caller's (the block index's, or replay's dense trace ids): the ladder keeps a
// byte of rung bits per id and, for leaf-first rungs, the parent each block entered with.
//
// Thread-safety: none. The daemon calls it under its mover's mutex; replay from one thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/status.h"
#include "index/admission_policy.h"
#include "index/eviction_policy.h"
#include "index/leaf_tracker.h"
#include "index/tier.h"

namespace kvtier {

// How one rung sheds blocks. Occupancy is used slots / capacity slots.
struct TierPolicyOptions {
  // Which resident block leaves next; eviction.capacity_blocks is set from the rung's slot count
  // (the value here is ignored).
  EvictionConfig eviction;
  // Whether a block may enter this rung unasked: a victim of the rung above moving down, or a new
  // block born here (reads are never gated). window_blocks 0 = the rung's capacity.
  AdmissionConfig admission;
  // Prefix-aware: evict only blocks with no resident child in this rung (index/leaf_tracker.h).
  bool leaf_first = false;
  // Fractions of capacity in (0, 1]; low_watermark <= high_watermark.
  double high_watermark = 0.95;
  double low_watermark = 0.90;

  // OK, or InvalidArgument naming "<prefix>.<field>".
  absl::Status Validate(const std::string& prefix) const;
};

struct RungOptions {
  std::string name;  // "T1", ... (messages and reports)
  // False: a rung this ladder runs without (a daemon with no GPU or no NVMe tier). Nothing enters
  // it; reads and victims pass it by.
  bool present = true;
  uint64_t capacity_slots = 0;  // > 0 when present
  TierPolicyOptions policy;
  // The rung a read's copy from here enters first, when present (a faster rung than this one);
  // -1: the nearest present rung above (the usual climb). The daemon's remote rung names T1, so a
  // remote hit is not written to NVMe on its way up.
  int climb_to = -1;
};

// What happens to a chosen victim (see the rules above).
enum class VictimFate : uint8_t { kLeave, kMoveDown, kDrop };

// Counters of one rung, in blocks. The one table the daemon's Stats, its metrics and replay's
// report read (KVTIER_RUNG_COUNTERS lists each once, with its meaning).
#define KVTIER_RUNG_COUNTERS(X)                                                         \
  X(hits, "reads served by a copy already in this rung")                                \
  X(gets_promoted, "reads served by a copy moved into this rung for them")              \
  X(promoted_out, "copies made from this rung into another for a read")                 \
  X(promotion_failures, "moves into this rung for a read that failed")                  \
  X(born, "new blocks that entered this rung")                                          \
  X(births_refused, "new blocks this rung's admission refused (not cached)")            \
  X(evictions, "victims chosen by this rung's policy")                                  \
  X(clean_evictions, "victims with a copy below: left with no write")                   \
  X(moved_down, "victims copied into the rung below, then freed here")                  \
  X(written_through, "blocks copied into the rung below ahead of eviction (kept here)") \
  X(move_down_failures, "victims whose copy into the rung below failed (dropped)")      \
  X(rejected, "victims the rung below refused (admission, or not admitting); dropped")  \
  X(dropped, "victims that left with no copy below")

struct RungCounters {
#define KVTIER_RUNG_COUNTER_FIELD(name, help) uint64_t name = 0;
  KVTIER_RUNG_COUNTERS(KVTIER_RUNG_COUNTER_FIELD)
#undef KVTIER_RUNG_COUNTER_FIELD
  RungCounters& operator+=(const RungCounters& other);
};

class Ladder {
 public:
  static constexpr int kNone = -1;

  // InvalidArgument naming the rung and field: no rungs, more than kMaxTiers, a present rung with
  // no capacity, a bad policy. `expected_ids` sizes the per-id arrays up front (they grow anyway).
  static absl::StatusOr<std::unique_ptr<Ladder>> Create(std::vector<RungOptions> rungs,
                                                        size_t expected_ids = 0);
  ~Ladder();
  Ladder(const Ladder&) = delete;
  Ladder& operator=(const Ladder&) = delete;

  int size() const { return static_cast<int>(rungs_.size()); }
  const RungOptions& options(int r) const;
  bool present(int r) const;
  // The nearest present rung below / above `r`, or kNone.
  int Below(int r) const { return state_[static_cast<size_t>(r)].below; }
  int Above(int r) const;

  // --- Residency: what the rungs' policies hold ---
  TierMask Mask(BlockId id) const { return id < mask_.size() ? mask_[id] : TierMask{0}; }
  // Mask without the bounds check, for replay's per-reference paths. Precondition: `id` is below
  // Create's `expected_ids` or has entered a rung.
  TierMask MaskUnchecked(BlockId id) const { return mask_[id]; }
  uint64_t Size(int r) const { return state_[static_cast<size_t>(r)].size; }
  // The parent `id` entered with (leaf-first ladders only; else kNoBlock).
  BlockId Parent(BlockId id) const { return id < parent_.size() ? parent_[id] : kNoBlock; }
  // A copy of `id` entered rung `r` (born there, or moved into it). Precondition: not resident in
  // `r`. `parent` is the block before it in its sequence, or kNoBlock (leaf-first rungs use it; a
  // block keeps the parent it first entered with).
  void Enter(int r, BlockId id, uint64_t ghost_key, BlockId parent) {
    RungState& s = state_[static_cast<size_t>(r)];
    if (id >= mask_.size()) EnsureId(id);
    if (any_leaf_first_ && mask_[id] == 0) parent_[id] = parent;
    s.eviction->Insert(id, s.needs_ghost_keys ? ghost_key : 0);
    mask_[id] |= static_cast<TierMask>(1u << r);
    ++s.size;
    if (s.leaves != nullptr) AddLeaf(s, id);
  }
  // The copy in `r` left without being chosen (dropped, failed, erased). No-op if not resident.
  void Remove(int r, BlockId id);
  // A read used the copy in `r`. No-op if not resident.
  void Touch(int r, BlockId id);
  // Touch when resident in `r`; false otherwise. Inline: replay's hot path (a hit in the rung it
  // reads) is one array read and one call.
  bool TouchIfIn(int r, BlockId id) {
    if ((Mask(id) & (1u << r)) == 0) return false;
    TouchResident(r, id);
    return true;
  }
  // Touch, for a caller that knows `id` is resident in `r` (replay, from MaskUnchecked).
  void TouchResident(int r, BlockId id) { policy_[static_cast<size_t>(r)]->Touch(id); }

  // --- Decisions ---
  // Where a read for `target` gets its copy from: `target` when `copies` has it, else the fastest
  // rung in `copies`; kNone for no copy.
  static int ReadSource(TierMask copies, int target);
  // The rung the next copy of a read enters on its way from `source` to `target`: `target` when
  // the source is faster (straight down), else the source's climb_to rung when present, else the
  // nearest present rung above `source` (never past `target`).
  int NextStep(int source, int target) const;
  // Rung order for shedding: bottom-up, present rungs only.
  const std::vector<int>& ShedOrder() const { return shed_order_; }
  // Whether `r` should shed now, with `used` its occupied slots not already on their way out:
  // starts above the high watermark, goes on until at or below the low one.
  bool ShouldShed(int r, uint64_t used) {
    RungState& s = state_[static_cast<size_t>(r)];
    if (used > s.high_slots) s.shedding = true;
    if (used <= s.low_slots && !(s.ran_full && used >= s.capacity_slots)) {
      s.shedding = s.ran_full = false;
    }
    return s.shedding;
  }
  // Marks `r` as over its watermarks (an allocation found it full), so it sheds down to its low
  // one, and by at least one block when that is the whole rung (low_watermark 1.0: else a rung
  // full of blocks that may leave would never make room).
  void MarkFull(int r) {
    RungState& s = state_[static_cast<size_t>(r)];
    s.shedding = s.ran_full = true;
  }
  // The policy's next victim in `r` that `allowed` accepts, or nullopt. The victim leaves the
  // rung's policy and leaf tracker (and its rung bit) now; if it must stay after all (a lease
  // pinned it), Enter it again. Counts an eviction.
  std::optional<BlockId> Choose(int r, absl::FunctionRef<bool(BlockId)> allowed) {
    RungState& s = state_[static_cast<size_t>(r)];
    std::optional<BlockId> victim =
        s.leaves == nullptr ? s.eviction->Evict(allowed) : ChooseLeaf(s, allowed);
    if (victim) Chosen(s, r, *victim);
    return victim;
  }
  // Choose with every block allowed (replay: no leases), without the predicate's indirect calls.
  std::optional<BlockId> ChooseAny(int r) {
    RungState& s = state_[static_cast<size_t>(r)];
    std::optional<BlockId> victim =
        s.leaves == nullptr ? s.eviction->EvictAny() : ChooseLeaf(s, [](BlockId) { return true; });
    if (victim) Chosen(s, r, *victim);
    return victim;
  }
  // The fate of a victim of `r` whose copies are `copies` (the caller's authority: the daemon's
  // index, which still lists copies on their way out). Asks the next rung's admission only when
  // the victim has no lower copy and `below_admitting`; counts clean evictions and rejections.
  VictimFate FateOf(int r, TierMask copies, uint64_t ghost_key, bool below_admitting) {
    RungState& s = state_[static_cast<size_t>(r)];
    if (HasCopyBelow(r, copies)) {
      ++s.counters.clean_evictions;
      return VictimFate::kLeave;
    }
    if (s.below == kNone) return VictimFate::kDrop;
    AdmissionPolicy* admission = state_[static_cast<size_t>(s.below)].admission;
    if (below_admitting && (admission == nullptr || admission->Admit(ghost_key))) {
      return VictimFate::kMoveDown;
    }
    ++s.counters.rejected;
    return VictimFate::kDrop;
  }
  // Whether rung `r` takes a new block (its admission; counts a refusal).
  bool AdmitBirth(int r, uint64_t ghost_key) {
    RungState& s = state_[static_cast<size_t>(r)];
    if (s.admission == nullptr || s.admission->Admit(ghost_key)) return true;
    ++s.counters.births_refused;
    return false;
  }
  // Whether rung `r` reads the ghost keys passed to Enter, FateOf (as the rung below) and
  // AdmitBirth: its admission, or an eviction policy with ghost history. When false, callers
  // whose keys are costly to fetch (replay's, a cold array) may pass 0.
  bool ReadsGhostKeys(int r) const {
    const RungState& s = state_[static_cast<size_t>(r)];
    return s.needs_ghost_keys || s.admission != nullptr;
  }
  // Whether any rung below `r` holds a copy in `copies`.
  bool HasCopyBelow(int r, TierMask copies) const { return (copies >> (r + 1)) != 0; }

  RungCounters& counters(int r) { return state_[static_cast<size_t>(r)].counters; }
  const RungCounters& counters(int r) const { return state_[static_cast<size_t>(r)].counters; }

  // Replay's prefetch hints (eviction_policy.h Prefetch): start loading `ids`' rung bits and rung
  // `r`'s policy state.
  void Prefetch(int r, absl::Span<const BlockId> ids) const;

 private:
  struct Rung;
  // What the per-reference paths read and write, kept here so they inline (replay calls them
  // for every block reference; the rest of a rung is in Rung, ladder.cc).
  struct RungState {
    RungCounters counters;
    uint64_t size = 0;  // resident blocks
    // The watermarks in slots: used > high_slots is used > high_watermark * capacity exactly
    // (for an integer `used`, u > x and u > floor(x) agree), so ShouldShed compares integers.
    uint64_t high_slots = 0, low_slots = 0;
    uint64_t capacity_slots = 0;
    AdmissionPolicy* admission = nullptr;  // null: admit all without a virtual call
    EvictionPolicy* eviction = nullptr;    // null when absent
    LeafTracker* leaves = nullptr;         // leaf-first only
    // Only policies with ghost history read ghost keys (S3-FIFO, ARC); the others get 0.
    bool needs_ghost_keys = true;
    int below = kNone;      // the nearest present rung below
    bool shedding = false;  // went above the high watermark; sheds down to the low one
    bool ran_full = false;  // MarkFull: shed at least one block
  };
  Ladder() = default;
  // What Choose does with the victim `v` of rung `r` once the policy gave it up.
  void Chosen(RungState& s, int r, BlockId v) {
    if (prefetch_victims_) PrefetchUpcoming(s);
    ++s.counters.evictions;
    --s.size;
    mask_[v] &= static_cast<TierMask>(~(1u << r));
    if (s.leaves != nullptr) s.leaves->Remove(v);
  }
  void EnsureId(BlockId id);
  // The slow parts of Enter and Choose for leaf-first rungs, and the victim prefetch.
  void AddLeaf(RungState& s, BlockId id);
  std::optional<BlockId> ChooseLeaf(RungState& s, absl::FunctionRef<bool(BlockId)> allowed);
  void PrefetchUpcoming(const RungState& s) const;

  std::vector<std::unique_ptr<Rung>> rungs_;
  std::array<EvictionPolicy*, kMaxTiers> policy_{};  // [r] rungs_[r]'s policy; null if absent
  std::array<RungState, kMaxTiers> state_{};         // [r]
  std::vector<int> shed_order_;
  std::vector<TierMask> mask_;   // [id] bit r: resident in rung r's policy
  std::vector<BlockId> parent_;  // [id] parent on first entry (only with a leaf-first rung)
  bool any_leaf_first_ = false;
  // Below this many ids the rung bits stay in the caches, and prefetching a victim's only costs.
  static constexpr size_t kPrefetchVictimIds = size_t{1} << 20;
  bool prefetch_victims_ = false;
};

}  // namespace kvtier
