// The block index: block key -> block metadata, shared by every tier of one daemon (DESIGN.md
// "Data flow") and, unchanged, by `kvtier replay`.
//
// For each block it records which tiers hold it (T0 GPU, T1 host, T2 NVMe), the slot per tier, the
// payload size, the lease count, the prefix parent, and a dense BlockId handle. Tiers index their
// eviction policies' per-id arrays by that id (index/eviction_policy.h). Policy state is not kept
// here; the index moves nothing and does no I/O. It records what the tiers tell it.
//
// Ids. An id names its block from Insert until Erase; after Erase it may name another block. Ids
// are small: every id ever handed out is < IdLimit(), and for uniformly distributed keys (block
// keys are XXH3 hashes) IdLimit() stays within a few percent of the largest Size() so far. That
// makes arrays indexed by id cheap. An erased id is reused before any new one.
//
// Memory. 40 bytes of entry plus 8 bytes of hash-table slot per table position. The table doubles
// when it is 80% full, so each shard runs at 40-80% load: at most 40 + 8 / 0.4 = 60 bytes per entry
// (50 at full load), plus one partly used 20 KiB slab step per shard. MemoryBytes() counts it and
// tests/index/block_index_test.cc pins it (53.5 B/entry measured at 10 M entries). Erased entries'
// slab space is reused, never returned. Each shard reserves address space (not memory) for the
// largest table and slab that BlockIndexOptions::max_entries allows, so nothing ever moves; it is
// committed only as it fills.
//
// Thread-safety: every method may be called concurrently from any thread. Keys are spread over
// `num_shards` shards, each with its own mutex for writers. LookupPrefix takes no lock: it reads
// optimistically and checks a per-shard sequence counter (a seqlock), falling back to the lock only
// while a writer keeps changing that shard, so lookups scale with cores and never wait for each
// other. A multi-key call is not one atomic snapshot: it sees each block as it was at some moment
// during the call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/types/span.h"
#include "common/status.h"
#include "index/block_key.h"
#include "index/eviction_policy.h"
#include "index/tier.h"

namespace kvtier {

namespace internal {
class BlockIndexShard;
class Entry;
}  // namespace internal

// A copy of one block's metadata, taken under its shard's lock.
struct BlockInfo {
  BlockKey key;
  BlockId id = kNoBlock;
  TierMask tiers = 0;                       // tiers holding the block; may be empty
  std::array<uint32_t, kNumTiers> slots{};  // slots[t]: slot in Tier t, meaningful iff InTier(t)
  uint32_t payload_bytes = 0;               // size of the payload in every tier, bytes
  uint32_t leases = 0;                      // leases held now
  BlockId parent = kNoBlock;                // prefix parent as given to Insert (see Insert)

  bool InTier(Tier tier) const { return (tiers & TierBit(tier)) != 0; }
};

// What a new block starts with: one copy, in `tier` at `slot`.
struct NewBlock {
  Tier tier = Tier::kT1;
  uint32_t slot = 0;
  uint32_t payload_bytes = 0;
  BlockId parent = kNoBlock;
};

struct BlockIndexOptions {
  // Number of shards (and locks): a power of two in [1, 4096]. More shards, less contention.
  uint32_t num_shards = 64;
  // Entries to size the tables for up front, so that filling to this size never rehashes (a rehash
  // holds one shard's lock for a time proportional to the shard's size). 0: grow from small.
  size_t expected_entries = 0;
  // The most entries the index must be able to hold: sizes the address space each shard reserves
  // (about 60 bytes of address space per entry, none of it memory until used). A shard that
  // receives more than its share (max_entries / num_shards, plus 25% and a little for uneven
  // spread) refuses further inserts with ResourceExhausted. The daemon sets it from its tiers' slot
  // counts; the default, 64 Mi entries, reserves about 4 GiB of address space.
  size_t max_entries = size_t{1} << 26;

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

class BlockIndex {
 public:
  // The most leases one block can hold at once; AcquireLease beyond it is ResourceExhausted.
  static constexpr uint32_t kMaxLeases = (1u << 24) - 1;
  // Bytes per entry: the entry itself and, at the lowest load a shard runs at (40%), its share of
  // the hash table. The whole index stays under kMaxBytesPerEntry per entry once it holds more
  // than ~2,000 entries per shard (the partly used slab steps and table pages are the rest).
  static constexpr size_t kEntryBytes = 40;
  static constexpr size_t kTableBytesPerEntry = 20;
  static constexpr size_t kMaxBytesPerEntry = 64;

  // Validates `options` and builds an empty index.
  static absl::StatusOr<std::unique_ptr<BlockIndex>> Create(const BlockIndexOptions& options);
  ~BlockIndex();
  BlockIndex(const BlockIndex&) = delete;
  BlockIndex& operator=(const BlockIndex&) = delete;

  struct InsertResult {
    BlockId id = kNoBlock;
    bool inserted = false;  // false: the key was already present and nothing was changed
  };
  // Inserts `key` as `block` unless the key is present; a present key is left as it is (DESIGN.md
  // "Store": keys already present are skipped) and its id is returned, so the caller frees the slot
  // it had filled. The parent link is stored as given and not maintained: after the parent is
  // erased the link may name another block. Errors: ResourceExhausted when the id space is used up.
  absl::StatusOr<InsertResult> Insert(const BlockKey& key, const NewBlock& block);

  // A copy of the metadata of `key`, or nullopt if absent.
  std::optional<BlockInfo> Find(const BlockKey& key) const;
  // A copy of the metadata of the block `id` names, or nullopt if no block has that id now. This is
  // how a tier that evicts by id finds the key.
  std::optional<BlockInfo> FindById(BlockId id) const;

  // The lookup of DESIGN.md "Data flow": returns n, the length of the longest prefix of `keys`
  // whose blocks are all present in at least one tier, and sets tiers[i] for i < n to the tiers
  // block i is in (tiers[i] for i >= n is unspecified). Takes no lease, changes nothing. Batched,
  // prefetched and lock-free: the fast path (tests/bench/index_bench.cc: ~23 M keys/s on one core
  // at 10 M entries, in batches of 64). Precondition: tiers.size() >= keys.size().
  size_t LookupPrefix(absl::Span<const BlockKey> keys, absl::Span<TierMask> tiers) const;

  // Records a copy of `key` in `tier` at `slot` (a promotion or demotion finished). Allowed while
  // leased. Errors: NotFound if absent; AlreadyExists if already in `tier` (clear it first, so no
  // slot is ever forgotten).
  absl::Status SetTier(const BlockKey& key, Tier tier, uint32_t slot);
  // Removes `key`'s copy in `tier` and returns the slot it held, for the caller to free. The block
  // stays in the index even with no tier left (Erase removes it). Errors: NotFound if absent or not
  // in `tier`; FailedPrecondition while leased (a leased block is never evicted or moved).
  absl::StatusOr<uint32_t> ClearTier(const BlockKey& key, Tier tier);
  // Like ClearTier, but also while leased: for a copy that is gone whatever the lease holders want
  // (its payload failed its checksum or could not be read). Whoever holds a lease for that copy is
  // told by the failed transfer. Errors: NotFound if absent or not in `tier`.
  absl::StatusOr<uint32_t> DropTier(const BlockKey& key, Tier tier);

  // Takes one lease on `key` and returns its metadata as of that moment (with the lease counted).
  // Errors: NotFound if absent; ResourceExhausted at kMaxLeases.
  absl::StatusOr<BlockInfo> AcquireLease(const BlockKey& key);
  // Gives one lease back. Errors: NotFound if absent; FailedPrecondition if it holds none (counts
  // never underflow).
  absl::Status ReleaseLease(const BlockKey& key);

  // Removes `key` and returns its last metadata; the caller frees the slots of its remaining tiers.
  // Its id may be handed out again. Errors: NotFound if absent; FailedPrecondition while leased.
  absl::StatusOr<BlockInfo> Erase(const BlockKey& key);

  // Number of blocks in the index.
  size_t Size() const;
  // Every id handed out so far is < IdLimit(): the size for arrays indexed by BlockId.
  BlockId IdLimit() const;
  // Heap bytes held by the index: table slots, entry slabs and shard headers.
  size_t MemoryBytes() const;

 private:
  explicit BlockIndex(const BlockIndexOptions& options);

  internal::BlockIndexShard& ShardOf(const BlockKey& key) const;
  uint32_t TagOf(const BlockKey& key) const { return static_cast<uint32_t>(key.lo >> shard_bits_); }
  // The id of the entry at `local` in the shard of `key`.
  BlockId IdOf(const BlockKey& key, uint32_t local) const;
  BlockInfo InfoOf(const internal::Entry& entry, uint32_t local) const;

  const uint32_t shard_bits_;  // log2(num_shards); a key's shard is key.lo's low shard_bits_ bits
  const uint32_t shard_mask_;  // num_shards - 1
  std::unique_ptr<internal::BlockIndexShard[]> shards_;  // [num_shards]
};

}  // namespace kvtier
