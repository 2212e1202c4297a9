// Belady's optimum with bypass: the offline replacement policy that knows the future, used by
// `kvtier replay --policy opt` as the upper bound every online policy is measured against.
//
// Time is counted in requests, not in references: all ids of one request are referenced "now"
// (DESIGN.md "Trace replay", the replay contract). A block's priority is its next use -- the index
// of the next request that references it, kNever if none -- and, to break ties, its depth (the
// position of the block in the request that referenced it), so a deeper block is evicted before a
// shallower one with the same next use and a parent never leaves before its child. Equal (next
// use, depth) is broken by the larger id, so the order is total and results are reproducible.
//
// Bypass: a block that is not resident is inserted and then, if the cache is over capacity, the
// block with the largest priority among residents *and the new block* leaves. If that is the new
// block, it was never really inserted (bypassed): nothing was written and nothing evicted.
//
// Cost: O(log n) amortised per reference (a binary max-heap with lazy invalidation, compacted when
// stale entries outnumber live ones). Memory: O(largest id) plus the heap.
//
// Thread-safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "index/eviction_policy.h"

namespace kvtier {

// For each position i of `refs`, split into requests by `request_begin` (request r references
// refs[request_begin[r], request_begin[r + 1]), size = requests + 1), the index of the next request
// after the one holding i that references refs[i] again, or BeladyCache::kNever. Ids are dense:
// every refs[i] < num_ids. Duplicates of an id inside one request all get the same value.
std::vector<uint32_t> NextUseByRequest(absl::Span<const uint32_t> refs,
                                       absl::Span<const uint64_t> request_begin, size_t num_ids);

class BeladyCache {
 public:
  static constexpr uint32_t kNever = UINT32_MAX;

  // What one Reference did.
  enum class Outcome : uint8_t {
    kTouched,   // was resident; its priority was updated
    kInserted,  // was absent and is now resident; `evicted` may name the block that left for it
    kBypassed,  // was absent and stays absent: its next use is farther than every resident one's
  };
  struct Result {
    Outcome outcome;
    std::optional<BlockId> evicted;
  };

  // `capacity_blocks` > 0. Ids must be < `num_ids`.
  BeladyCache(size_t capacity_blocks, size_t num_ids);

  bool Contains(BlockId id) const { return resident_[id] != 0; }
  size_t Size() const { return size_; }
  size_t capacity() const { return capacity_; }

  // References `id`, at `depth` in the current request, whose next use is request `next_use`
  // (kNever if none). Precondition: `next_use` is later than every request referenced so far.
  Result Reference(BlockId id, uint32_t next_use, uint32_t depth);

 private:
  struct Entry {
    uint32_t next_use;
    uint32_t depth;
    BlockId id;
  };
  // Larger = evicted first: later next use, then deeper, then larger id.
  static bool Before(const Entry& a, const Entry& b);
  bool IsLive(const Entry& e) const;
  void Push(const Entry& e);
  // Pops stale entries off the top; returns the live maximum. Precondition: size_ > 0.
  const Entry& Top();
  void CompactIfStale();

  size_t capacity_;
  size_t size_ = 0;
  std::vector<uint8_t> resident_;   // per id
  std::vector<uint32_t> next_use_;  // per resident id: its current priority
  std::vector<uint32_t> depth_;     // per resident id
  std::vector<Entry> heap_;         // max-heap by Before; may hold stale entries
};

}  // namespace kvtier
