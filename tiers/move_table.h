// The mover's moves in flight (tiers/mover.h): one entry per block and destination rung, from the
// moment a move is decided until its completion has been recorded. A read that needs a block in a
// rung it is already on its way into joins the move as a waiter instead of starting another, so a
// block is copied into a rung once however many reads wait for it (and whichever started it: a
// read, or a victim of the rung above moving down).
//
// Thread-safety: none; the mover guards it with its mutex.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "index/block_key.h"
#include "index/tier.h"
#include "tiers/storage_tier.h"

namespace kvtier {

// A block a Get leased, ready in the Get's target tier (tier_manager.h).
struct LeasedBlock {
  SlotId slot = kNoSlot;
  uint32_t payload_bytes = 0;
  Tier tier = Tier::kT1;
};
using GetDone = std::function<void(absl::StatusOr<LeasedBlock>)>;

namespace internal {

struct MoveKey {
  BlockKey key;
  int to = 0;  // destination rung
  bool operator==(const MoveKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const MoveKey& k) {
    return H::combine(std::move(h), k.key, k.to);
  }
};

struct Move {
  bool for_read = false;  // a read's copy (a promotion); else a victim moving down (a demotion)
  int from = 0;
  SlotId src_slot = kNoSlot;
  SlotId dst_slot = kNoSlot;  // kNoSlot until the destination gave one
  uint32_t payload_bytes = 0;
  uint64_t expected_checksum = 0;  // as given at commit; 0 = none (checked before persisting)
  uint64_t namespace_id = 0;
  // A copy down that keeps the source (write-through ahead of eviction, TierManagerOptions::
  // t0_write_through): the block stays in `from` and is clean once the copy lands.
  bool keep_source = false;
  bool dropped = false;          // Drop removed the block meanwhile: free both slots at completion
  std::vector<GetDone> waiters;  // reads answered at completion; each holds a lease on the block
};

class MoveTable {
 public:
  // The move of `key` into rung `to`, or null.
  Move* Find(const BlockKey& key, int to);
  // Adds a move; false (and nothing changed) when one of `key` into `to` is in flight.
  bool Add(const MoveKey& id, Move move);
  // Removes and returns the move. Precondition: present.
  Move Take(const MoveKey& id);
  bool empty() const { return moves_.empty(); }
  size_t size() const { return moves_.size(); }
  // Victims of rung `r` moving down now (their slots in `r` free up when the moves finish).
  uint64_t leaving(int r) const { return leaving_[static_cast<size_t>(r)]; }
  // Write-through copies out of rung `r` now (Move::keep_source: their slots in `r` stay).
  uint64_t copying(int r) const { return copying_[static_cast<size_t>(r)]; }
  // Reads of `key` whose destination had no free slot, oldest first.
  std::deque<MoveKey>& waiting_for_room() { return waiting_; }
  bool any_waiting() const { return !waiting_.empty(); }

 private:
  std::array<uint64_t, kMaxTiers>* CountOf(const Move& move);  // leaving_, copying_ or none
  absl::flat_hash_map<MoveKey, Move> moves_;
  std::array<uint64_t, kMaxTiers> leaving_{};
  std::array<uint64_t, kMaxTiers> copying_{};
  std::deque<MoveKey> waiting_;
};

}  // namespace internal
}  // namespace kvtier
