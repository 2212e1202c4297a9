// A simulated tier stack for `kvtier replay`: tiers T0..Tk with capacities in blocks, each with the
// daemon's own eviction and admission policies (index/), holding no data -- only which block is
// where. DESIGN.md "Demotion and eviction" in miniature.
//
// Exact semantics (what the tests pin and the report counts):
//  * Residency. A block may be resident in several tiers at once (promotion keeps the lower copy).
//    ResidentMask(id) has bit t set while the block is in tier t. A reference hits in the highest
//    tier holding it (the lowest set bit).
//  * Reference(id) -- the "insert or touch" of one block (the simulator calls it for every block of
//    a request, last to first, after counting that request's hits):
//      - resident in T0: touch it in T0's policy.
//      - resident only lower, highest copy in tier j: promote into T0 without asking T0's admission
//        (the hit itself proves reuse); count one block promoted from tier j; touch the tier-j
//        copy.
//      - absent everywhere: offer it to the tiers top-down; the first whose admission accepts
//        receives it (one block written into that tier); if none accepts it is not cached.
//  * Eviction. After every insert a tier over capacity evicts one victim chosen by its policy (in
//    leaf-first mode only among blocks with no resident child in that tier). A victim of tier t is
//    demoted into tier t+1 if it is not already there and t+1's admission accepts it (one block
//    demoted from t; t+1 may evict in turn). A victim already resident below is clean: it costs no
//    write and the lower copy is not touched. Victims of the last tier, and rejected ones, are gone
//    from that tier only.
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

namespace kvtier::replay {

inline constexpr size_t kMaxTiers = 8;  // residency is one byte of tier bits per block
inline constexpr BlockId kNoParent = UINT32_MAX;

struct TierConfig {
  std::string name = "T0";
  uint64_t capacity_blocks = 0;  // > 0
  // eviction.policy: a MakeEvictionPolicy name, or "opt" (Belady; single tier only, simulator.h).
  // eviction.capacity_blocks is overwritten with capacity_blocks.
  EvictionConfig eviction;
  AdmissionConfig admission;  // window_blocks 0 = the tier's capacity
  bool leaf_first = false;
};

// Per-tier counters, all in blocks.
struct TierCounters {
  uint64_t block_hits = 0;    // references whose highest copy was in this tier
  uint64_t prefix_hits = 0;   // of those, references inside their request's leading run of hits
  uint64_t tokens_saved = 0;  // prefill tokens of this tier's prefix hits, capped per request
  uint64_t promoted = 0;      // copied from this tier into T0 on a reference
  uint64_t demoted = 0;       // victims of this tier written into the next tier
  uint64_t written = 0;       // new blocks admitted into this tier (not demotions/promotions)
  uint64_t evictions = 0;     // victims chosen by this tier's policy
  uint64_t rejected = 0;      // offers (new or demoted blocks) this tier's admission refused
};

// InvalidArgument naming the tier and field: empty stack, > kMaxTiers, zero capacity, bad policy.
absl::Status ValidateTiers(const std::vector<TierConfig>& tiers);

class TierStack {
 public:
  // `ghost_keys[id]` names each block to the policies (Trace::hash_ids); it must outlive the stack.
  static absl::StatusOr<std::unique_ptr<TierStack>> Create(const std::vector<TierConfig>& tiers,
                                                           absl::Span<const uint64_t> ghost_keys);
  ~TierStack();
  TierStack(const TierStack&) = delete;
  TierStack& operator=(const TierStack&) = delete;

  uint8_t ResidentMask(BlockId id) const { return mask_[id]; }
  // Inserts or touches `id` as described above. `parent` is the block before it in the request
  // (kNoParent for the first); leaf-first tiers use it. Inline: a hit in T0 -- the common case --
  // is one array read and one call.
  void Reference(BlockId id, BlockId parent) {
    if (mask_[id] & 1) {
      top_policy_->Touch(id);
    } else {
      ReferenceMiss(id, parent);
    }
  }

  // A hint, no observable effect: `ids` are about to be counted and referenced (the simulator's
  // next request). Starts loading their residency bytes and T0's policy state (eviction_policy.h
  // Prefetch); lower tiers are referenced rarely enough to go without. Precondition: every id is
  // below ghost_keys.size().
  void Prefetch(absl::Span<const BlockId> ids) const;

  size_t num_tiers() const { return tiers_.size(); }
  size_t Size(size_t tier) const;
  // Counters of the tier's policy actions; the simulator adds hits, prefix hits and tokens.
  TierCounters& counters(size_t tier);
  const TierCounters& counters(size_t tier) const;

 private:
  struct Tier;
  explicit TierStack(absl::Span<const uint64_t> ghost_keys);
  void ReferenceMiss(BlockId id, BlockId parent);  // not resident in T0
  void InsertInto(size_t t, BlockId id);
  void EvictFrom(size_t t);
  bool Admit(size_t t, BlockId id);

  absl::Span<const uint64_t> ghost_keys_;
  std::vector<uint8_t> mask_;    // per block: bit t = resident in tier t
  std::vector<BlockId> parent_;  // per block: its parent on entering the stack (leaf-first)
  std::vector<std::unique_ptr<Tier>> tiers_;
  EvictionPolicy* top_policy_ = nullptr;  // tiers_[0]'s
  // Prefetch hints only pay when the per-block arrays outgrow the caches; below this many blocks
  // they would only cost instructions.
  static constexpr size_t kPrefetchMinBlocks = size_t{1} << 20;
  bool prefetch_ = false;
};

}  // namespace kvtier::replay
