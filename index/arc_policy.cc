// ARC (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead Replacement Cache", FAST'03), Fig. 4.
//
//   T1: resident blocks seen once recently (LRU order); T2: resident blocks seen at least twice.
//   B1, B2: ghost keys of blocks evicted from T1, T2. p: the adaptive target size of T1, in [0, c].
//   L1 = T1 + B1, L2 = T2 + B2.
//
//   Insert, key in B1:  p = min(c, p + max(1, |B2| / |B1|)); key leaves B1; block to MRU of T2.
//   Insert, key in B2:  p = max(0, p - max(1, |B1| / |B2|)); key leaves B2; block to MRU of T2.
//   Insert, otherwise:  case IV below; block to MRU of T1.
//   Touch:              block to MRU of T2.
//   Evict (REPLACE):    from T1's LRU end into B1 if T1 is non-empty and (|T1| > p, or |T1| = p and
//                       the last Insert was a B2 hit); otherwise from T2's LRU end into B2.
//
//   Case IV, the ghost lists before a new block enters (all sizes without it):
//     A. |L1| = c: if |T1| < c, drop B1's LRU ghost and REPLACE; else (T1 holds c blocks, B1 is
//        empty) T1's LRU block leaves with no ghost, and B2 is left alone.
//     B. |L1| < c and |L1| + |L2| = 2c: drop B2's LRU ghost, then REPLACE.
//
// The paper runs REPLACE inside the miss, after adapting p and before x enters T1/T2; callers of
// this interface insert first and then evict while over capacity. So Insert does the paper's steps
// up to REPLACE at once (adapt p, take the key out of its ghost list, case IV's ghost drops, sized
// without the new block as the paper sizes them) but links the block into T1/T2 only at the next
// call other than Evict or after the next Evict that finds a victim among the older blocks; REPLACE
// compares p with |T1| without it, as the paper does. Only when no older block may go is the
// pending block itself the victim.
//
// After each eviction the bounds |L1| <= c and |L1| + |L2| <= 2c are restored by dropping the
// oldest ghosts (B1's, then B2's, then B1's again). Under the paper's calls (one eviction per miss
// of a full cache) only case IV-A with a full T1 reaches them: the victim, T1's LRU, is then B1's
// only ghost and is dropped at once, which is the paper's "no ghost". Under other calls (Erase, a
// caller that evicts less or more) they keep the ghost lists bounded by 2c.
//
// With can_evict: a rejected block is passed over and keeps its place; if REPLACE's list has no
// acceptable block the other list is tried. Nothing changes when every block is rejected.
#include <algorithm>
#include <cassert>
#include <utility>

#include "index/intrusive_list.h"
#include "index/policies_internal.h"

namespace kvtier {
namespace {

enum List : uint8_t { kNone = 0, kT1 = 1, kT2 = 2 };

class ArcPolicy final : public EvictionPolicy {
 public:
  explicit ArcPolicy(size_t capacity_blocks) : c_(capacity_blocks), t1_(&links_), t2_(&links_) {}

  void Insert(BlockId id, uint64_t ghost_key) override;
  void Touch(BlockId id) override {
    Commit();
    assert(list_[id] != kNone);
    if (list_[id] == kT1) {
      t1_.Remove(id);
      list_[id] = kT2;
      t2_.PushBack(id);
    } else {
      t2_.MoveToBack(id);
    }
  }
  void Erase(BlockId id) override {
    Commit();
    assert(list_[id] != kNone);
    (list_[id] == kT1 ? t1_ : t2_).Remove(id);
    list_[id] = kNone;
  }
  std::optional<BlockId> Evict(absl::FunctionRef<bool(BlockId)> can_evict) override;

  size_t Size() const override { return t1_.size() + t2_.size() + (pending_ != kNoId ? 1 : 0); }
  std::string_view Name() const override { return "arc"; }

 private:
  // Links the pending block in at the MRU end of its list.
  void Commit() {
    if (pending_ == kNoId) return;
    (list_[pending_] == kT1 ? t1_ : t2_).PushBack(pending_);
    pending_ = kNoId;
  }
  // REPLACE over the linked blocks.
  std::optional<BlockId> Replace(absl::FunctionRef<bool(BlockId)> can_evict);
  // Evicts the least recent acceptable block of `from` into `ghosts`.
  std::optional<BlockId> EvictFrom(IntrusiveList& from, GhostQueue& ghosts,
                                   absl::FunctionRef<bool(BlockId)> can_evict);
  // Case IV's ghost drops, before a new block (not a ghost hit) enters T1.
  void MakeGhostRoomForNewBlock();
  // Restores |L1| <= c and |L1| + |L2| <= 2c after an eviction.
  void TrimGhosts();

  const size_t c_;
  double p_ = 0;  // target |T1|; real-valued as in the paper (the deltas are ratios)
  bool last_insert_hit_b2_ = false;
  uint32_t pending_ = kNoId;  // the latest Insert, not yet linked into T1/T2
  ListLinks links_;
  IntrusiveList t1_;  // LRU first
  IntrusiveList t2_;  // LRU first
  GhostQueue b1_;
  GhostQueue b2_;
  std::vector<uint8_t> list_;   // [id] List
  std::vector<uint64_t> keys_;  // [id] ghost key
};

void ArcPolicy::Insert(BlockId id, uint64_t ghost_key) {
  Commit();
  links_.EnsureId(id);
  GrowToFit(list_, id, uint8_t{kNone});
  GrowToFit(keys_, id, uint64_t{0});
  assert(list_[id] == kNone);
  keys_[id] = ghost_key;
  const auto b1 = static_cast<double>(b1_.size());
  const auto b2 = static_cast<double>(b2_.size());
  last_insert_hit_b2_ = false;
  if (b1_.Remove(ghost_key)) {
    p_ = std::min(static_cast<double>(c_), p_ + std::max(1.0, b2 / b1));
    list_[id] = kT2;
  } else if (b2_.Remove(ghost_key)) {
    p_ = std::max(0.0, p_ - std::max(1.0, b1 / b2));
    last_insert_hit_b2_ = true;
    list_[id] = kT2;
  } else {
    MakeGhostRoomForNewBlock();
    list_[id] = kT1;
  }
  pending_ = id;
}

std::optional<BlockId> ArcPolicy::Evict(absl::FunctionRef<bool(BlockId)> can_evict) {
  std::optional<BlockId> victim = Replace(can_evict);
  if (victim) {
    Commit();
  } else if (pending_ != kNoId && can_evict(pending_)) {
    victim = std::exchange(pending_, kNoId);
    (list_[*victim] == kT1 ? b1_ : b2_).PushNewest(keys_[*victim]);
    list_[*victim] = kNone;
  }
  if (victim) TrimGhosts();
  return victim;
}

std::optional<BlockId> ArcPolicy::Replace(absl::FunctionRef<bool(BlockId)> can_evict) {
  const auto t1 = static_cast<double>(t1_.size());
  const bool from_t1 =
      !t1_.empty() && (t1 > p_ || (last_insert_hit_b2_ && t1 == p_) || t2_.empty());
  std::optional<BlockId> victim =
      from_t1 ? EvictFrom(t1_, b1_, can_evict) : EvictFrom(t2_, b2_, can_evict);
  if (!victim) victim = from_t1 ? EvictFrom(t2_, b2_, can_evict) : EvictFrom(t1_, b1_, can_evict);
  return victim;
}

std::optional<BlockId> ArcPolicy::EvictFrom(IntrusiveList& from, GhostQueue& ghosts,
                                            absl::FunctionRef<bool(BlockId)> can_evict) {
  for (uint32_t id = from.front(); id != kNoId; id = from.Next(id)) {
    if (!can_evict(id)) continue;
    from.Remove(id);
    list_[id] = kNone;
    ghosts.PushNewest(keys_[id]);
    return id;
  }
  return std::nullopt;
}

void ArcPolicy::MakeGhostRoomForNewBlock() {
  // Sized without the new block, which is not linked yet: counting it would make a full T1 with a
  // full B2 look like case IV-B at 2c + 1 and drop a B2 ghost the paper keeps.
  if (t1_.size() + b1_.size() >= c_) {  // IV-A
    // With T1 full, B1 is empty and nothing is dropped here; TrimGhosts drops the victim's ghost.
    while (!b1_.empty() && t1_.size() + b1_.size() >= c_) b1_.PopOldest();
    return;
  }
  auto total = [this] { return t1_.size() + t2_.size() + b1_.size() + b2_.size(); };
  while (!b2_.empty() && total() >= 2 * c_) b2_.PopOldest();  // IV-B
}

void ArcPolicy::TrimGhosts() {
  const size_t t1 = t1_.size() + (pending_ != kNoId && list_[pending_] == kT1 ? 1 : 0);
  while (!b1_.empty() && t1 + b1_.size() > c_) b1_.PopOldest();
  auto total = [this] { return Size() + b1_.size() + b2_.size(); };
  while (!b2_.empty() && total() > 2 * c_) b2_.PopOldest();
  while (!b1_.empty() && total() > 2 * c_) b1_.PopOldest();
}

}  // namespace

std::unique_ptr<EvictionPolicy> NewArcPolicy(size_t capacity_blocks) {
  return std::make_unique<ArcPolicy>(capacity_blocks);
}

}  // namespace kvtier
