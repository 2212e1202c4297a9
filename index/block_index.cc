#include "index/block_index.h"

#include <algorithm>
#include <array>
#include <bit>
#include <string>

#include "index/block_index_shard.h"

namespace kvtier {
namespace {

using internal::BlockIndexShard;
using internal::Entry;
using internal::kNoLocal;

// "block <32 hex digits> <what>", for every error message of the index.
std::string About(const BlockKey& key, std::string_view what) {
  std::string message = "block " + key.ToHex() + " ";
  message.append(what);
  return message;
}

absl::Status NotFound(const BlockKey& key) {
  return absl::NotFoundError(About(key, "is not in the index"));
}

absl::Status CheckTier(Tier tier) {
  if (static_cast<int>(tier) < kNumTiers) return absl::OkStatus();
  return absl::InvalidArgumentError("no such tier: " + std::to_string(static_cast<int>(tier)));
}

}  // namespace

absl::Status BlockIndexOptions::Validate() const {
  if (num_shards == 0 || num_shards > 4096 || !std::has_single_bit(num_shards)) {
    return absl::InvalidArgumentError(
        "block index: num_shards must be a power of two in [1, 4096], got " +
        std::to_string(num_shards));
  }
  if (expected_entries > (size_t{1} << 32)) {
    return absl::InvalidArgumentError("block index: expected_entries must be at most 2^32, got " +
                                      std::to_string(expected_entries));
  }
  if (max_entries == 0 || max_entries > (size_t{1} << 32) || expected_entries > max_entries) {
    return absl::InvalidArgumentError(
        "block index: max_entries must be in [max(1, expected_entries), 2^32], got " +
        std::to_string(max_entries));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BlockIndex>> BlockIndex::Create(const BlockIndexOptions& options) {
  KVTIER_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<BlockIndex> index(new BlockIndex(options));
  // Ids are (local << shard_bits_) | shard; capping locals here keeps every id below kNoBlock.
  // Each shard may take 25% more than its even share (and 4096 more) of max_entries before it
  // refuses inserts: enough for the spread of uniformly hashed keys.
  const size_t share = options.max_entries >> index->shard_bits_;
  const uint32_t local_limit = static_cast<uint32_t>(
      std::min<size_t>(UINT32_MAX >> index->shard_bits_, share + share / 4 + 4096));
  const size_t per_shard = (options.expected_entries + index->shard_mask_) >> index->shard_bits_;
  for (uint32_t s = 0; s < options.num_shards; ++s) {
    if (!index->shards_[s].Init(per_shard, local_limit)) {
      return absl::ResourceExhaustedError("block index: cannot reserve memory for " +
                                          std::to_string(options.expected_entries) + " entries");
    }
  }
  return index;
}

BlockIndex::BlockIndex(const BlockIndexOptions& options)
    : shard_bits_(static_cast<uint32_t>(std::countr_zero(options.num_shards))),
      shard_mask_(options.num_shards - 1),
      shards_(std::make_unique<BlockIndexShard[]>(options.num_shards)) {}

BlockIndex::~BlockIndex() = default;

BlockIndexShard& BlockIndex::ShardOf(const BlockKey& key) const {
  return shards_[key.lo & shard_mask_];
}

BlockId BlockIndex::IdOf(const BlockKey& key, uint32_t local) const {
  return (local << shard_bits_) | static_cast<uint32_t>(key.lo & shard_mask_);
}

BlockInfo BlockIndex::InfoOf(const internal::Entry& entry, uint32_t local) const {
  BlockInfo info;
  info.key = entry.key();
  info.id = IdOf(info.key, local);
  info.tiers = entry.tiers();
  for (int t = 0; t < kNumTiers; ++t) info.slots[t] = entry.slot(static_cast<Tier>(t));
  info.payload_bytes = entry.payload_bytes();
  info.leases = entry.leases();
  info.parent = entry.parent();
  return info;
}

absl::StatusOr<BlockIndex::InsertResult> BlockIndex::Insert(const BlockKey& key,
                                                            const NewBlock& block) {
  KVTIER_RETURN_IF_ERROR(CheckTier(block.tier));
  const BlockIndexShard::Inserted result = ShardOf(key).Insert(TagOf(key), key, block);
  if (result.local == kNoLocal) {
    return absl::ResourceExhaustedError(
        About(key, "cannot be inserted: its index shard is full or out of memory"));
  }
  return InsertResult{IdOf(key, result.local), result.inserted};
}

std::optional<BlockInfo> BlockIndex::Find(const BlockKey& key) const {
  std::optional<BlockInfo> info;
  ShardOf(key).Read(TagOf(key), key,
                    [&](const Entry& entry, uint32_t local) { info = InfoOf(entry, local); });
  return info;
}

std::optional<BlockInfo> BlockIndex::FindById(BlockId id) const {
  std::optional<BlockInfo> info;
  if (id == kNoBlock) return info;
  shards_[id & shard_mask_].ReadLocal(
      id >> shard_bits_, [&](const Entry& entry, uint32_t local) { info = InfoOf(entry, local); });
  return info;
}

size_t BlockIndex::LookupPrefix(absl::Span<const BlockKey> keys, absl::Span<TierMask> tiers) const {
  // A three-stage pipeline that keeps many cache misses in flight: the table slot of key
  // i + kSlotAhead is prefetched, the slot of key i + kEntryAhead is probed (its entry prefetched),
  // and key i is confirmed against its entry, all without locks (block_index_shard.h). Distances
  // from 12/6 to 32/16 measured the same with tests/bench/index_bench.cc; the rate is memory-bound.
  constexpr size_t kSlotAhead = 16;
  constexpr size_t kEntryAhead = 8;
  const size_t n = keys.size();
  std::array<uint32_t, kEntryAhead> hints{};  // hints[j % kEntryAhead]: entry hint for key j
  for (size_t j = 0; j < std::min(n, kSlotAhead); ++j)
    ShardOf(keys[j]).PrefetchSlot(TagOf(keys[j]));
  for (size_t j = 0; j < std::min(n, kEntryAhead); ++j) {
    hints[j] = ShardOf(keys[j]).ProbeHint(TagOf(keys[j]));
  }
  for (size_t i = 0; i < n; ++i) {
    if (i + kSlotAhead < n) ShardOf(keys[i + kSlotAhead]).PrefetchSlot(TagOf(keys[i + kSlotAhead]));
    const uint32_t hint = hints[i % kEntryAhead];
    if (i + kEntryAhead < n) {
      const BlockKey& ahead = keys[i + kEntryAhead];
      hints[i % kEntryAhead] = ShardOf(ahead).ProbeHint(TagOf(ahead));
    }
    const std::optional<TierMask> present = ShardOf(keys[i]).TiersOf(TagOf(keys[i]), keys[i], hint);
    if (!present.has_value() || *present == 0) return i;
    tiers[i] = *present;
  }
  return n;
}

absl::Status BlockIndex::SetTier(const BlockKey& key, Tier tier, uint32_t slot) {
  KVTIER_RETURN_IF_ERROR(CheckTier(tier));
  absl::Status status;
  const bool found = ShardOf(key).Modify(TagOf(key), key, [&](Entry& entry, uint32_t) {
    if ((entry.tiers() & TierBit(tier)) != 0) {
      status = absl::AlreadyExistsError(About(key, "is already in tier " +
                                                       std::string(TierName(tier)) + " (slot " +
                                                       std::to_string(entry.slot(tier)) + ")"));
      return;
    }
    entry.set_slot(tier, slot);
    entry.set_tiers(entry.tiers() | TierBit(tier));
  });
  return found ? status : NotFound(key);
}

absl::StatusOr<uint32_t> BlockIndex::ClearTier(const BlockKey& key, Tier tier) {
  KVTIER_RETURN_IF_ERROR(CheckTier(tier));
  absl::StatusOr<uint32_t> result;
  const bool found = ShardOf(key).Modify(TagOf(key), key, [&](Entry& entry, uint32_t) {
    if ((entry.tiers() & TierBit(tier)) == 0) {
      result = absl::NotFoundError(About(key, "is not in tier " + std::string(TierName(tier))));
    } else if (entry.leases() != 0) {
      result = absl::FailedPreconditionError(
          About(key, "is leased (" + std::to_string(entry.leases()) +
                         " leases); cannot leave tier " + std::string(TierName(tier))));
    } else {
      entry.set_tiers(entry.tiers() & ~TierBit(tier));
      result = entry.slot(tier);
    }
  });
  return found ? result : NotFound(key);
}

absl::StatusOr<uint32_t> BlockIndex::DropTier(const BlockKey& key, Tier tier) {
  KVTIER_RETURN_IF_ERROR(CheckTier(tier));
  absl::StatusOr<uint32_t> result;
  const bool found = ShardOf(key).Modify(TagOf(key), key, [&](Entry& entry, uint32_t) {
    if ((entry.tiers() & TierBit(tier)) == 0) {
      result = absl::NotFoundError(About(key, "is not in tier " + std::string(TierName(tier))));
      return;
    }
    entry.set_tiers(entry.tiers() & ~TierBit(tier));
    result = entry.slot(tier);
  });
  return found ? result : NotFound(key);
}

absl::StatusOr<BlockInfo> BlockIndex::AcquireLease(const BlockKey& key) {
  absl::StatusOr<BlockInfo> result;
  const bool found = ShardOf(key).Modify(TagOf(key), key, [&](Entry& entry, uint32_t local) {
    if (entry.leases() == kMaxLeases) {
      result =
          absl::ResourceExhaustedError(About(key, "already holds the most leases a block can"));
      return;
    }
    entry.set_leases(entry.leases() + 1);
    result = InfoOf(entry, local);
  });
  return found ? result : NotFound(key);
}

absl::Status BlockIndex::ReleaseLease(const BlockKey& key) {
  absl::Status status;
  const bool found = ShardOf(key).Modify(TagOf(key), key, [&](Entry& entry, uint32_t) {
    if (entry.leases() == 0) {
      status = absl::FailedPreconditionError(About(key, "holds no lease to release"));
      return;
    }
    entry.set_leases(entry.leases() - 1);
  });
  return found ? status : NotFound(key);
}

absl::StatusOr<BlockInfo> BlockIndex::Erase(const BlockKey& key) {
  absl::StatusOr<BlockInfo> result;
  const bool found = ShardOf(key).EraseIf(TagOf(key), key, [&](const Entry& entry, uint32_t local) {
    if (entry.leases() != 0) {
      result = absl::FailedPreconditionError(About(
          key, "is leased (" + std::to_string(entry.leases()) + " leases); cannot be erased"));
      return false;
    }
    result = InfoOf(entry, local);
    return true;
  });
  return found ? result : NotFound(key);
}

size_t BlockIndex::Size() const {
  size_t size = 0;
  for (uint32_t s = 0; s <= shard_mask_; ++s) size += shards_[s].GetStats().live;
  return size;
}

BlockId BlockIndex::IdLimit() const {
  BlockId limit = 0;
  for (uint32_t s = 0; s <= shard_mask_; ++s) {
    const uint32_t used = shards_[s].GetStats().used;
    if (used != 0) limit = std::max(limit, (((used - 1) << shard_bits_) | s) + 1);
  }
  return limit;
}

size_t BlockIndex::MemoryBytes() const {
  size_t bytes = sizeof(*this) + (size_t{shard_mask_} + 1) * sizeof(BlockIndexShard);
  for (uint32_t s = 0; s <= shard_mask_; ++s) bytes += shards_[s].GetStats().heap_bytes;
  return bytes;
}

}  // namespace kvtier
