#include "tiers/move_table.h"

namespace kvtier::internal {

Move* MoveTable::Find(const BlockKey& key, int to) {
  auto it = moves_.find(MoveKey{key, to});
  return it == moves_.end() ? nullptr : &it->second;
}

bool MoveTable::Add(const MoveKey& id, Move move) {
  const int from = move.from;
  const bool leaves = !move.for_read;
  const bool inserted = moves_.try_emplace(id, std::move(move)).second;
  if (inserted && leaves) ++leaving_[static_cast<size_t>(from)];
  return inserted;
}

Move MoveTable::Take(const MoveKey& id) {
  auto it = moves_.find(id);
  Move move = std::move(it->second);
  moves_.erase(it);
  if (!move.for_read) --leaving_[static_cast<size_t>(move.from)];
  return move;
}

}  // namespace kvtier::internal
