// S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP'23), following the
// paper's Algorithm 1 and its reference implementation in libCacheSim (S3FIFO.c, original variant):
//
//   - S, a small probationary FIFO of max(1, floor(small_fraction * capacity)) blocks; M, the main
//     FIFO with the rest (its target); G, a FIFO of max(1, M's target) ghost keys, oldest dropped.
//   - Insert: to M if the ghost key is in G (removed from G), else to S; frequency 0.
//   - Touch: frequency + 1, saturating at 3 (2 bits). Nothing moves.
//   - Evict from M while |M| exceeds its target or S is empty, else from S.
//       From S, oldest first: a block touched at least twice while in S (freq >= 2, the paper's
//       "freq > 1") moves to the back of M with frequency 0; any other block is the victim and its
//       ghost key goes to G.
//       From M, oldest first: a block with frequency > 0 goes to the back with frequency - 1; a
//       block with frequency 0 is the victim (it leaves no ghost).
//
// The paper makes room before a new block enters; callers of this interface insert first and then
// evict while over capacity. So that the victims are the paper's, Insert decides the block's queue
// at once (and takes its key out of G) but links it in only at the next call other than Evict or
// after the next Evict that finds a victim among the older blocks; only when none of those may go
// is the pending block itself the victim (leaving a ghost if it was bound for S).
//
// G is consulted in libCacheSim's order, not Algorithm 1's: libCacheSim looks the missed key up in
// G (and removes it) before making room, Algorithm 1 only after, when inserting. The two differ
// when making room pushes a ghost that overflows G: there the paper may forget the new key's ghost
// (the block then goes to S) or drop one older ghost more. We keep libCacheSim's order, the
// authors' own simulator's; Insert, which runs before Evict, implements it naturally.
//
// Unlike the paper we return one victim per call and let the caller decide when to call, so a block
// moved from S to M never triggers a nested eviction of M: M may overshoot its target by the blocks
// just moved, and the next call evicts from M because of that.
//
// With can_evict: a rejected block is passed over with no change at all (not moved, not aged). If
// the preferred queue has no acceptable block, the other one is tried; each scan visits a block at
// most once plus one visit per frequency unit spent, so a call costs O(1 + rejected) amortised and,
// when every block is rejected, returns nullopt having changed nothing.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "index/intrusive_list.h"
#include "index/policies_internal.h"

namespace kvtier {
namespace {

constexpr uint8_t kMaxFreq = 3;         // 2-bit counter
constexpr uint8_t kMoveToMainFreq = 2;  // the paper's "t.freq > 1"

enum Queue : uint8_t { kNone = 0, kSmall = 1, kMain = 2 };

class S3FifoPolicy final : public EvictionPolicy {
 public:
  S3FifoPolicy(size_t capacity_blocks, double small_fraction) : small_(&links_), main_(&links_) {
    auto small =
        static_cast<size_t>(std::floor(static_cast<double>(capacity_blocks) * small_fraction));
    small = std::clamp<size_t>(small, 1, capacity_blocks);
    main_target_ = capacity_blocks - small;
    ghost_capacity_ = std::max<size_t>(main_target_, 1);
  }

  void Insert(BlockId id, uint64_t ghost_key) override;
  void Touch(BlockId id) override {
    Commit();
    assert(queue_[id] != kNone);
    if (freq_[id] < kMaxFreq) ++freq_[id];
  }
  void Erase(BlockId id) override {
    Commit();
    assert(queue_[id] != kNone);
    QueueOf(id).Remove(id);
    queue_[id] = kNone;
  }
  std::optional<BlockId> Evict(absl::FunctionRef<bool(BlockId)> can_evict) override;

  size_t Size() const override {
    return small_.size() + main_.size() + (pending_ != kNoId ? 1 : 0);
  }
  std::string_view Name() const override { return "s3fifo"; }

 private:
  IntrusiveList& QueueOf(BlockId id) { return queue_[id] == kSmall ? small_ : main_; }
  // Links the pending block in at the back of its queue.
  void Commit() {
    if (pending_ == kNoId) return;
    QueueOf(pending_).PushBack(pending_);
    pending_ = kNoId;
  }
  void GhostPush(uint64_t key) {
    ghost_.PushNewest(key);
    if (ghost_.size() > ghost_capacity_) ghost_.PopOldest();
  }
  std::optional<BlockId> EvictCommitted(absl::FunctionRef<bool(BlockId)> can_evict);
  std::optional<BlockId> EvictSmall(absl::FunctionRef<bool(BlockId)> can_evict, bool* moved);
  std::optional<BlockId> EvictMain(absl::FunctionRef<bool(BlockId)> can_evict);

  ListLinks links_;
  IntrusiveList small_;         // S, oldest first
  IntrusiveList main_;          // M, oldest first
  GhostQueue ghost_;            // G
  std::vector<uint8_t> queue_;  // [id] Queue
  std::vector<uint8_t> freq_;   // [id] 0..kMaxFreq
  std::vector<uint64_t> keys_;  // [id] ghost key
  size_t main_target_ = 0;
  size_t ghost_capacity_ = 1;
  uint32_t pending_ = kNoId;  // the latest Insert, not yet linked into its queue
};

void S3FifoPolicy::Insert(BlockId id, uint64_t ghost_key) {
  Commit();
  links_.EnsureId(id);
  GrowToFit(queue_, id, uint8_t{kNone});
  GrowToFit(freq_, id, uint8_t{0});
  GrowToFit(keys_, id, uint64_t{0});
  assert(queue_[id] == kNone);
  keys_[id] = ghost_key;
  freq_[id] = 0;
  queue_[id] = ghost_.Remove(ghost_key) ? kMain : kSmall;
  pending_ = id;
}

std::optional<BlockId> S3FifoPolicy::Evict(absl::FunctionRef<bool(BlockId)> can_evict) {
  if (auto victim = EvictCommitted(can_evict)) {
    Commit();
    return victim;
  }
  if (pending_ == kNoId || !can_evict(pending_)) return std::nullopt;
  const BlockId victim = std::exchange(pending_, kNoId);
  if (queue_[victim] == kSmall) GhostPush(keys_[victim]);
  queue_[victim] = kNone;
  return victim;
}

std::optional<BlockId> S3FifoPolicy::EvictCommitted(absl::FunctionRef<bool(BlockId)> can_evict) {
  bool moved = false;
  if (main_.size() <= main_target_ && !small_.empty()) {
    if (auto victim = EvictSmall(can_evict, &moved)) return victim;
    return EvictMain(can_evict);  // also sees the blocks EvictSmall just moved
  }
  if (auto victim = EvictMain(can_evict)) return victim;
  if (auto victim = EvictSmall(can_evict, &moved)) return victim;
  // Main had nothing acceptable; only blocks that EvictSmall moved there (frequency 0) can be now.
  return moved ? EvictMain(can_evict) : std::nullopt;
}

std::optional<BlockId> S3FifoPolicy::EvictSmall(absl::FunctionRef<bool(BlockId)> can_evict,
                                                bool* moved) {
  for (uint32_t id = small_.front(); id != kNoId;) {
    uint32_t next = small_.Next(id);
    if (can_evict(id)) {
      small_.Remove(id);
      if (freq_[id] < kMoveToMainFreq) {
        queue_[id] = kNone;
        GhostPush(keys_[id]);
        return id;
      }
      freq_[id] = 0;
      queue_[id] = kMain;
      main_.PushBack(id);
      *moved = true;
    }
    id = next;
  }
  return std::nullopt;
}

std::optional<BlockId> S3FifoPolicy::EvictMain(absl::FunctionRef<bool(BlockId)> can_evict) {
  for (uint32_t id = main_.front(); id != kNoId;) {
    uint32_t next = main_.Next(id);
    if (can_evict(id)) {
      if (freq_[id] == 0) {
        main_.Remove(id);
        queue_[id] = kNone;
        return id;
      }
      // Reinsert with one unit less. If it was the last block, it is also the next one to look at.
      --freq_[id];
      main_.MoveToBack(id);
      if (next == kNoId) next = id;
    }
    id = next;
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<EvictionPolicy> NewS3FifoPolicy(size_t capacity_blocks, double small_fraction) {
  return std::make_unique<S3FifoPolicy>(capacity_blocks, small_fraction);
}

}  // namespace kvtier
