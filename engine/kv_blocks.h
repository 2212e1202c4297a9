// The KV pool's slots as the scheduler sees them: which slots each sequence holds and which of its
// leading blocks are already cached somewhere. Two implementations:
//   - BlockManager (block_manager.h): a private pool with an in-process prefix cache;
//   - DaemonKvBlocks (daemon_kv_blocks.h): the daemon's own tier slots, shared with every client
//     of kvtierd: prefixes are leased where kvtierd caches them, new blocks are written into
//     working slots and published under their keys as they fill.
// Block table entries are slot numbers of the pool the backend attends over.
//
// "Can I" (CachedPrefixBlocks, SlotsToAdmit, SlotsToGrow, CanTake) is separate from "do it"
// (Admit, Grow, Commit, Release): the scheduler asks first and changes nothing until the answer
// is yes, and a "do it" whose "can I" said yes cannot fail. (An implementation may prepare in the
// "can I" calls, e.g. lease or reserve slots, so that the "do it" holds.)
//
// Thread-safety: implementations are not thread-safe; one owner (the scheduler).
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "engine/sequence.h"

namespace kvtier::engine {

class KvBlocks {
 public:
  virtual ~KvBlocks() = default;

  virtual int64_t block_tokens() const = 0;
  // Slots of the whole pool: a sequence needing more can never run.
  virtual int32_t num_slots() const = 0;
  // Slots CanTake would hand out now without asking anyone (DaemonKvBlocks: its reserve).
  virtual int32_t free_slots() const = 0;
  // Slots needed to hold `tokens` tokens.
  int64_t BlocksFor(int64_t tokens) const { return (tokens + block_tokens() - 1) / block_tokens(); }

  // The sequences the scheduler may try to admit this step, in order (before any "can I" call of
  // the step): an implementation may look their prefixes up at once (DaemonKvBlocks: one
  // LookupMany), so that CachedPrefixBlocks answers from that. Changes nothing else.
  virtual void LookAhead(std::span<Sequence* const> waiting) {}

  // The slots the running sequences need for their next tokens (Scheduler::GrowthReserve), told
  // before the step's admissions: an implementation that must bring a prefix into the pool first
  // (DaemonKvBlocks with a PrefixLoader) starts only when the pool holds it beside them.
  virtual void SetGrowthReserve(int64_t slots) {}

  // CachedPrefixBlocks' answers for a prefix that must come into the pool first (DaemonKvBlocks
  // with a PrefixLoader; ask again in a later step):
  // - kPrefixLoading: on its way (a load in flight, which had room for it): the sequences behind
  //   it may be admitted meanwhile;
  // - kPrefixWaitsForRoom: not started; the pool does not hold it beside the running sequences
  //   yet (or another load is in flight): nothing behind it is admitted, so the room comes to it.
  static constexpr int64_t kPrefixLoading = -1;
  static constexpr int64_t kPrefixWaitsForRoom = -2;

  // ---- Can I ----
  // How many leading full blocks of `seq` (which holds no slots) are cached, at most
  // (num_tokens - 1) / block_tokens: at least one token is always left to compute, whose logits
  // choose the next token. Or kPrefixLoading or kPrefixWaitsForRoom (only where
  // MayMakeRoomLater).
  virtual int64_t CachedPrefixBlocks(Sequence& seq) = 0;
  // Slots that admitting `seq` with its first `cached` blocks from the cache and room for `end`
  // tokens would take from what CanTake counts.
  virtual int64_t SlotsToAdmit(Sequence& seq, int64_t cached, int64_t end) = 0;
  // New slots `seq` needs to hold `end` tokens.
  virtual int64_t SlotsToGrow(const Sequence& seq, int64_t end) const = 0;
  virtual bool CanTake(int64_t slots) = 0;

  // ---- Do it ----
  // Attaches the first `cached` blocks from the cache (num_computed_tokens becomes
  // cached * block_tokens) and grows to `end` tokens. Preconditions: seq holds no slots,
  // cached <= CachedPrefixBlocks(seq), CanTake(SlotsToAdmit(seq, cached, end)).
  virtual void Admit(Sequence& seq, int64_t cached, int64_t end) = 0;
  // Appends slots until `seq` can hold `end` tokens. Precondition: CanTake(SlotsToGrow(seq, end)).
  virtual void Grow(Sequence& seq, int64_t end) = 0;
  // Enters into the cache the full blocks of `seq` computed from token `from` on (the start of
  // the step that computed them). An implementation may hold them until EndStep (DaemonKvBlocks
  // publishes a step's blocks in one call); until then they are this sequence's own.
  virtual void Commit(Sequence& seq, int64_t from) = 0;
  // The step's Commit calls are done: enter what they held back (the scheduler calls it once per
  // step, after every Commit and before any Release of the step).
  virtual void EndStep() {}
  // Drops `seq`'s hold on its slots and whatever a "can I" call prepared for it, and empties its
  // block table; num_computed_tokens becomes 0. For a sequence that holds nothing, only the latter.
  virtual void Release(Sequence& seq) = 0;

  // Gives back what the "can I" calls prepared for a waiting sequence that was not admitted
  // (DaemonKvBlocks: its leased or loading prefix), so that a running sequence may have that room;
  // the sequence asks again when it is next tried. True when something was given back.
  virtual bool GiveBackUnadmitted() { return false; }

  // The first error a "do it" call met and could not return (the daemon went away, say); the
  // engine stops stepping on it. OK for implementations that cannot fail.
  virtual absl::Status status() const { return absl::OkStatus(); }
  // True when a step that could schedule nothing for want of slots may succeed later with no
  // request finishing (kvtierd making room in the background); false when it never will.
  virtual bool MayMakeRoomLater() const { return false; }
};

}  // namespace kvtier::engine
