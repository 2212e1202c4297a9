// The mover's side of the shared rung (T3, shared_tier.h): a lookup's probe past the local prefix
// and the index entries it adds; and the staging buffers of moves down between two rungs that are
// not host memory (T2 -> T3).
#include <cstdlib>
#include <utility>

#include "tiers/mover.h"

namespace kvtier::internal {

StagingBuffers::~StagingBuffers() {
  for (std::byte* b : free_) std::free(b);
}

std::byte* StagingBuffers::Take() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      std::byte* b = free_.back();
      free_.pop_back();
      return b;
    }
  }
  const size_t bytes = (bytes_ + 4095) / 4096 * 4096;
  return static_cast<std::byte*>(std::aligned_alloc(4096, bytes));
}

void StagingBuffers::Give(std::byte* buffer) {
  {
    absl::MutexLock lock(&mu_);
    if (free_.size() < keep_) {
      free_.push_back(buffer);
      return;
    }
  }
  std::free(buffer);
}

size_t Mover::ExtendPrefix(absl::Span<const BlockKey> keys, size_t n, uint64_t namespace_id,
                           absl::Span<TierMask> tiers) {
  int r = Ladder::kNone;
  for (int t = 0; t < kNumTiers; ++t) {
    if (RungOf(t).shared != nullptr) r = t;
  }
  if (r == Ladder::kNone || n >= keys.size()) return n;
  SharedTier& shared = *RungOf(r).shared;
  const size_t count = std::min<size_t>(keys.size() - n, shared.max_probe_keys());
  std::vector<uint32_t> bytes(count);
  shared.Probe(keys.subspan(n, count), shared.probe_budget(), absl::MakeSpan(bytes));
  size_t i = n;
  for (; i < n + count; ++i) {
    const uint32_t payload = bytes[i - n];
    if (payload == 0) {  // not in the store (or no answer): a local copy may go on with the prefix
      std::optional<BlockInfo> info = index_.Find(keys[i]);
      if (!info || info->tiers == 0) break;
      tiers[i] = info->tiers;
      continue;
    }
    absl::StatusOr<TierMask> mask =
        AdoptShared(r, keys[i], i > 0 ? &keys[i - 1] : nullptr, namespace_id, payload);
    if (!mask.ok() || *mask == 0) break;
    tiers[i] = *mask;
  }
  return i;
}

void Mover::FindShared(absl::Span<const BlockKey> keys, uint64_t namespace_id) {
  int r = Ladder::kNone;
  for (int t = 0; t < kNumTiers; ++t) {
    if (RungOf(t).shared != nullptr) r = t;
  }
  if (r == Ladder::kNone) return;
  std::vector<size_t> unknown;  // [j] index in `keys` of the j-th key no tier holds
  std::vector<BlockKey> ask;
  for (size_t i = 0; i < keys.size() && ask.size() < RungOf(r).shared->max_probe_keys(); ++i) {
    std::optional<BlockInfo> info = index_.Find(keys[i]);
    if (info && info->tiers != 0) continue;
    unknown.push_back(i);
    ask.push_back(keys[i]);
  }
  if (ask.empty()) return;  // the common case: no round trip
  SharedTier& shared = *RungOf(r).shared;
  std::vector<uint32_t> bytes(ask.size());
  shared.Probe(ask, shared.probe_budget(), absl::MakeSpan(bytes));
  for (size_t j = 0; j < ask.size(); ++j) {
    if (bytes[j] == 0) continue;
    const size_t i = unknown[j];
    (void)AdoptShared(r, keys[i], i > 0 ? &keys[i - 1] : nullptr, namespace_id, bytes[j]);
  }
}

absl::StatusOr<TierMask> Mover::AdoptShared(int r, const BlockKey& key, const BlockKey* parent,
                                            uint64_t namespace_id, uint32_t payload_bytes) {
  if (std::optional<BlockInfo> info = index_.Find(key); info && info->InTier(TierOf(r))) {
    return info->tiers;  // known already: no placeholder slot taken
  }
  KVTIER_ASSIGN_OR_RETURN(const SlotId slot, AllocateIn(r));  // may forget an old remote block
  absl::MutexLock lock(&mu_);
  BlockId parent_id = kNoBlock;
  if (parent != nullptr) {
    if (std::optional<BlockInfo> p = index_.Find(*parent)) parent_id = p->id;
  }
  absl::StatusOr<BlockIndex::InsertResult> ins =
      index_.Insert(key, NewBlock{TierOf(r), slot, payload_bytes, parent_id});
  if (!ins.ok()) {
    FreeSlotLocked(r, slot);
    return ins.status();
  }
  std::optional<BlockInfo> info = index_.Find(key);
  if (!ins->inserted) {
    // Known locally: the store's copy is recorded too, if it is of the same block (same size)
    // and none was recorded meanwhile.
    if (!info || info->payload_bytes != payload_bytes || info->InTier(TierOf(r)) ||
        !index_.SetTier(key, TierOf(r), slot).ok()) {
      FreeSlotLocked(r, slot);
      return info ? info->tiers : TierMask{0};
    }
  }
  EnsureId(ins->id);
  if (ins->inserted) checksum_[ins->id] = 0;  // unknown: the value's header has it
  if (ins->inserted || namespace_[ins->id] == 0) namespace_[ins->id] = namespace_id;
  ladder_->Enter(r, ins->id, key.lo, parent_id);
  const auto tiers = static_cast<TierMask>((info ? info->tiers : TierMask{0}) | TierBit(TierOf(r)));
  if (!info || info->leases == 0) EvictableLocked(tiers);  // its copies above have one below now
  return tiers;
}

}  // namespace kvtier::internal
