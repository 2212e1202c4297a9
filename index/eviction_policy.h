// Eviction policies: which resident block of one tier leaves next (DESIGN.md "Demotion and
// eviction").
//
// A policy orders the blocks resident in one tier. It holds no data and does no I/O; the tier (or
// the replay tool's simulated tier) owns residency and asks the policy for a victim when it is
// above its watermark. The same policy code runs in kvtierd and in `kvtier replay`, so a hit ratio
// measured offline is the one the daemon would get.
//
// Block ids are dense small integers chosen by the caller (the block index and the replay tool both
// allocate them from 0 and reuse them only after Erase/Evict); policies keep per-id state in arrays
// indexed by id, so memory is proportional to the largest id ever inserted.
//
// `ghost_key` is a 64-bit name of the block that outlives its residency (the low half of its block
// key, or the trace's hash id). Policies with ghost history (S3-FIFO, ARC) remember recently
// evicted ghost keys and treat a re-insert of one as a sign of reuse.
//
// Leaf-first (prefix-aware) mode and leases are not the policy's business: the caller passes
// `can_evict`, and the policy returns the first block in its own order for which it is true. A
// skipped block keeps its place and its state. Evict costs O(1 + blocks skipped), amortised.
//
// Order of calls: a tier may insert first and evict after (what `kvtier replay` and the tier
// manager do) or evict first and insert after (the papers' order). To make the first order pick the
// papers' victims, SIEVE, S3-FIFO and ARC keep the most recently inserted block out of the running
// until the next successful Evict or any other call; it is chosen only when nothing else may go.
//
// Thread-safety: none. A tier serialises calls to its policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/status.h"

namespace kvtier {

using BlockId = uint32_t;
// "No block": an absent parent link, never a valid id.
inline constexpr BlockId kNoBlock = UINT32_MAX;

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // `id` became resident. Precondition: `id` is not resident.
  virtual void Insert(BlockId id, uint64_t ghost_key) = 0;
  // A resident `id` was referenced (a hit). Precondition: `id` is resident.
  virtual void Touch(BlockId id) = 0;
  // A resident `id` left for a reason other than eviction (dropped by a client, corrupt). It leaves
  // no ghost. Precondition: `id` is resident.
  virtual void Erase(BlockId id) = 0;
  // Chooses the next victim among resident ids for which `can_evict(id)` is true, removes it from
  // the policy (leaving a ghost where the policy keeps them) and returns it; nullopt when no
  // resident id may be evicted. `can_evict` must not call back into the policy.
  virtual std::optional<BlockId> Evict(absl::FunctionRef<bool(BlockId)> can_evict) = 0;
  // Evict with every id allowed: the same victim and effect. A policy may override it to spare the
  // predicate's indirect call per candidate (replay evicts on almost every miss).
  virtual std::optional<BlockId> EvictAny() {
    return Evict([](BlockId) { return true; });
  }

  // Prefetch hints, for callers whose per-id state outgrows the CPU caches (`kvtier replay` on a
  // trace of millions of blocks). Neither changes anything observable, and the defaults do nothing.
  //
  // The caller is about to Touch or Insert `ids`: start loading their per-id state into the cache.
  // Any ids are allowed, resident or not, never inserted or beyond the largest id seen.
  virtual void Prefetch(absl::Span<const BlockId> ids) const {}
  // An id this policy expects to choose a few Evict calls from now, so that the caller can prefetch
  // its own per-id state for it (e.g. residency bits it clears on eviction); kNoVictimHint when it
  // has no guess. Only a guess: it may be wrong, stale, or not resident.
  virtual BlockId UpcomingVictim() const { return kNoVictimHint; }
  static constexpr BlockId kNoVictimHint = UINT32_MAX;

  // Number of resident ids.
  virtual size_t Size() const = 0;
  virtual std::string_view Name() const = 0;
};

struct EvictionConfig {
  // One of: "lru", "fifo", "sieve", "s3fifo", "arc".
  std::string policy = "lru";
  // The tier's capacity in blocks. S3-FIFO sizes its small queue and ghost queue from it; ARC its
  // target and ghost lists. Must be > 0.
  size_t capacity_blocks = 1;
  // S3-FIFO: fraction of capacity given to the small (probationary) queue, in (0, 1).
  double s3fifo_small_fraction = 0.1;

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

// Names accepted by EvictionConfig::policy, for help texts and sweeps.
std::string_view EvictionPolicyNames();  // "lru, fifo, sieve, s3fifo, arc"

// Validates `config` and builds the policy it names.
absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(const EvictionConfig& config);

}  // namespace kvtier
