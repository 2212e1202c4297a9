// SharedTier: a tier that other daemons write too (T3, the remote store of tiers/remote/,
// DESIGN.md "The remote tier"), so it may hold blocks this daemon's block index has never heard
// of, and may lose any block at any time (the store evicts by its own policy).
//
// How the tier manager uses one (tier_manager.h): it is the ladder's last rung, key-addressed
// (Allocate hands out placeholder slots that only count this daemon's view of the store against
// its capacity; Free forgets, it never deletes from the store, which other daemons share);
// writes and reads go by BlockRecord::key (StorageTier::ReadRecord); and a lookup that misses
// locally asks Probe which of the rest of the prefix the store holds, and records those in the
// index as T3 copies, so a get of one promotes it like any lower copy. A block the store lost
// meanwhile fails its read with NotFound: a plain miss.
//
// Availability. Stats().admitting is false while the store is unavailable (its circuit breaker is
// open, or probing whether the store is back): nothing is written to it, probes answer nothing, and
// reads fail fast (Unavailable). The tier comes back by itself when the store does.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>

#include "absl/types/span.h"
#include "tiers/storage_tier.h"

namespace kvtier {

class SharedTier : public StorageTier {
 public:
  // For each of `keys` (namespace-scoped daemon keys): the payload size the store claims for it, or
  // 0 when it does not hold it or did not answer within `budget`. Waits at most about `budget`; an
  // answer that comes later is dropped. Precondition: payload_bytes.size() == keys.size().
  virtual void Probe(absl::Span<const BlockKey> keys, std::chrono::microseconds budget,
                     absl::Span<uint32_t> payload_bytes) = 0;
  // The most keys one Probe asks about: a lookup probes at most this many past its local prefix.
  virtual uint32_t max_probe_keys() const = 0;
  // The budget a lookup gives Probe.
  virtual std::chrono::microseconds probe_budget() const = 0;
  // Returns once every Write and ReadRecord issued before it has completed and its `done` has
  // returned (the tier manager calls it before it goes away: a `done` calls back into it).
  virtual void WaitIdle() = 0;
};

}  // namespace kvtier
