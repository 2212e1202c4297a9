// The KV pool's slots as the scheduler sees them (nano-vllm's BlockManager): which slots each
// sequence holds, how many sequences share each one (prefix sharing), and an in-process prefix
// cache from block key to slot.
//
// Keys are the daemon's block keys (index/block_key.h: XXH3-128 chained from a namespace root over
// each full block's token ids), so the blocks this cache names can later be published to kvtierd
// under the same names. A block enters the cache only once its K/V is computed (Commit). A slot no
// sequence holds any more keeps its block cached, in least-recently-released order, until a slot
// is needed and no never-cached one is free: then the oldest is evicted.
//
// "Can I" (CachedPrefixBlocks, SlotsToAdmit, SlotsToGrow, CanTake) is separate from "do it"
// (Admit, Grow, Commit, Release): the scheduler asks first and changes nothing until the answer
// is yes.
//
// Thread-safety: not thread-safe; one owner (the scheduler).
#pragma once

#include <cstdint>
#include <list>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/kv_blocks.h"
#include "engine/sequence.h"
#include "index/block_key.h"

namespace kvtier::engine {

class BlockManager final : public KvBlocks {
 public:
  // num_slots slots of block_tokens tokens (both > 0). `root`: the key chain's parent of every
  // sequence's first block (the namespace root). prefix_caching off: nothing is ever found.
  BlockManager(int32_t num_slots, int64_t block_tokens, const BlockKey& root,
               bool prefix_caching = true);

  int64_t block_tokens() const override { return block_tokens_; }
  int32_t num_slots() const override { return static_cast<int32_t>(slots_.size()); }
  // Slots no sequence holds (never-cached free ones plus cached ones that may be evicted).
  int32_t free_slots() const override { return static_cast<int32_t>(free_.size() + lru_.size()); }
  // Blocks in the prefix cache (held or not).
  int32_t cached_blocks() const { return static_cast<int32_t>(by_key_.size()); }

  // ---- Can I ----
  // How many leading full blocks of `seq` (which holds no slots) are in the cache, at most
  // (num_tokens - 1) / block_tokens: at least one token is always left to compute, whose logits
  // choose the next token.
  int64_t CachedPrefixBlocks(Sequence& seq) override;
  // Free slots that admitting `seq` with its first `cached` blocks from the cache and room for
  // `end` tokens would use: the new slots, plus the cached ones no sequence holds now.
  int64_t SlotsToAdmit(Sequence& seq, int64_t cached, int64_t end) override;
  // New slots `seq` needs to hold `end` tokens.
  int64_t SlotsToGrow(const Sequence& seq, int64_t end) const override;
  bool CanTake(int64_t slots) override { return free_slots() >= slots; }

  // ---- Do it ----
  // Attaches the first `cached` blocks from the cache (num_computed_tokens becomes
  // cached * block_tokens) and grows to `end` tokens. Preconditions: seq holds no slots,
  // cached <= CachedPrefixBlocks(seq), CanTake(SlotsToAdmit(seq, cached, end)).
  void Admit(Sequence& seq, int64_t cached, int64_t end) override;
  // Appends slots until `seq` can hold `end` tokens. Precondition: CanTake(SlotsToGrow(seq, end)).
  void Grow(Sequence& seq, int64_t end) override;
  // Enters into the cache the full blocks of `seq` computed from token `from` on (the start of
  // the step that computed them). A block whose key is already cached in another slot stays out.
  void Commit(Sequence& seq, int64_t from) override;
  // Drops `seq`'s hold on its slots (the last block first, so a sequence's deepest blocks are
  // evicted before its prefix) and empties its block table; num_computed_tokens becomes 0.
  void Release(Sequence& seq) override;

 private:
  struct Slot {
    int32_t refs = 0;
    bool keyed = false;  // in by_key_ under `key`
    BlockKey key;
    std::list<int32_t>::iterator lru;  // in lru_ when refs == 0 and keyed
  };
  // The slot cached under `key` (-1: none).
  int32_t Find(const BlockKey& key) const;
  // A slot no one holds, evicting the oldest cached one when no never-cached slot is free.
  int32_t TakeFree();
  void Hold(int32_t slot);

  int64_t block_tokens_;
  BlockKey root_;
  bool prefix_caching_;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;  // refs == 0, not keyed; a stack
  std::list<int32_t> lru_;     // refs == 0, keyed; the least recently released first
  absl::flat_hash_map<BlockKey, int32_t> by_key_;
};

}  // namespace kvtier::engine
