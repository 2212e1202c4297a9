#include "tiers/move_table.h"

namespace kvtier::internal {

Move* MoveTable::Find(const BlockKey& key, int to) {
  auto it = moves_.find(MoveKey{key, to});
  return it == moves_.end() ? nullptr : &it->second;
}

std::array<uint64_t, kMaxTiers>* MoveTable::CountOf(const Move& move) {
  if (move.for_read) return nullptr;
  return move.keep_source ? &copying_ : &leaving_;
}

bool MoveTable::Add(const MoveKey& id, Move move) {
  const int from = move.from;
  std::array<uint64_t, kMaxTiers>* count = CountOf(move);
  const bool inserted = moves_.try_emplace(id, std::move(move)).second;
  if (inserted && count != nullptr) ++(*count)[static_cast<size_t>(from)];
  return inserted;
}

Move MoveTable::Take(const MoveKey& id) {
  auto it = moves_.find(id);
  Move move = std::move(it->second);
  moves_.erase(it);
  if (std::array<uint64_t, kMaxTiers>* count = CountOf(move))
    --(*count)[static_cast<size_t>(move.from)];
  return move;
}

}  // namespace kvtier::internal
