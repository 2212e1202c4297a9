// RemoteTier: T3, the remote tier (DESIGN.md "The remote tier", issue 15) as a rung of the tier
// manager's ladder: a SharedTier (tiers/shared_tier.h) over a RemoteStore (remote_store.h).
//
// Slots. The store is key-addressed, so this tier's slots are placeholders: Allocate counts one
// block of this daemon's view of the store against capacity_bytes / slot_bytes (ResourceExhausted
// when full, so the manager forgets its oldest remote blocks) and always answers slot 0; Free
// forgets one. Nothing is ever deleted from the store here: other daemons share its blocks, and
// the store evicts by its own maxmemory-policy.
//
// Transfers. Write stores record.key's value (header + payload from `src`); ReadRecord gets it
// into `dst`, verified against the key, namespace and checksum (a bad value: NotFound, counted by
// the store as corrupt); a value the store no longer holds is NotFound too, and one of another
// size than the record says DataLoss. Read (without a record) is InvalidArgument: this tier has no
// slots to read. Each runs on one of `threads` worker threads, since store calls block on the
// network; `done` runs there. A prefix's blocks are so read one GET each, `threads` at a time, not
// pipelined: for 2 MiB blocks that already reaches the store's own rate with the same parallelism
// (docs/benchmarks.md "Remote tier: a prefix hit through kvtierd"), deep pipelines of 2 MiB
// replies measured slower, and one batch would visit a cluster's nodes one after another
// (ClusterRouter::Execute).
//
// Availability. Stats().admitting follows the store's circuit breaker: true only while it is
// closed. While it is open or probing, Allocate refuses (Unavailable) and lookups do not probe, so
// no write is started that the breaker would refuse; a health thread probes the store every
// breaker_open_ms (one EXISTS), so the tier comes back by itself even when no traffic would probe
// it.
//
// Thread-safety: every method may be called from any thread. The destructor waits for the work
// posted before it (each `done` runs) and stops the health thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tiers/nvme_verify_pool.h"
#include "tiers/remote/remote_store.h"
#include "tiers/shared_tier.h"

namespace kvtier {

struct RemoteTierOptions {
  RemoteStoreOptions store;
  // This daemon's view of the store: the most remote blocks it keeps in its index (a lookup finds
  // others by probing). A multiple of slot_bytes; > 0.
  uint64_t capacity_bytes = uint64_t{16} << 30;
  uint32_t slot_bytes = 2u << 20;  // the daemon's slot size (t1.slot_bytes)
  uint32_t threads = 4;            // worker threads for store calls, in [1, 256]
  // A lookup that misses locally waits at most this long for the store's answer, in [1, 1000000].
  uint32_t lookup_budget_us = 2000;
  // Blocks past the local prefix one lookup asks the store about, in [1, 65536].
  uint32_t lookup_max_blocks = 256;

  // OK, or every problem, one per line, each naming its key ("remote.capacity_bytes: ...").
  absl::Status Validate() const;
};

class RemoteTier final : public SharedTier {
 public:
  // Validates `options` and opens the store (connects to nothing yet).
  static absl::StatusOr<std::unique_ptr<RemoteTier>> Open(const RemoteTierOptions& options);
  ~RemoteTier() override;

  Tier tier() const override { return Tier::kT3; }
  uint32_t slot_bytes() const override { return options_.slot_bytes; }
  uint32_t capacity_slots() const override { return capacity_slots_; }
  absl::StatusOr<SlotId> Allocate() override;
  void Free(SlotId slot) override;
  void Write(SlotId slot, const BlockRecord& record, const void* src, IoDone done) override;
  void Read(SlotId slot, void* dst, IoDone done) override;
  void ReadRecord(SlotId slot, const BlockRecord& record, void* dst, IoDone done) override;
  TierStats Stats() const override;

  void Probe(absl::Span<const BlockKey> keys, std::chrono::microseconds budget,
             absl::Span<uint32_t> payload_bytes) override;
  uint32_t max_probe_keys() const override { return options_.lookup_max_blocks; }
  std::chrono::microseconds probe_budget() const override {
    return std::chrono::microseconds(options_.lookup_budget_us);
  }
  void WaitIdle() override;

  // The store's own counters (hits, misses, bytes, latencies, errors by kind, nodes up).
  RemoteStoreStats StoreStats() const { return store_->Stats(); }
  RemoteStore& store() { return *store_; }

 private:
  RemoteTier(const RemoteTierOptions& options, std::unique_ptr<RemoteStore> store);
  void HealthLoop();
  // Runs a transfer on a worker; WaitIdle waits for every one to return.
  void RunTransfer(std::function<void()> transfer);
  bool available() const { return store_->available(); }

  const RemoteTierOptions options_;
  const uint32_t capacity_slots_;
  std::unique_ptr<RemoteStore> store_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> rejected_{0};
  IoCounters io_;
  std::mutex health_mu_;
  std::condition_variable health_cv_;
  bool stopping_ = false;  // guarded by health_mu_
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  uint64_t transfers_ = 0;  // posted and not yet returned; guarded by idle_mu_
  std::thread health_;
  // Last: destroyed first, so every posted transfer finishes while the rest is alive.
  std::unique_ptr<VerifyPool> workers_;
};

}  // namespace kvtier
