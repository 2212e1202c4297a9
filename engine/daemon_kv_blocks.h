// KvBlocks over kvtierd's own slots (kv_blocks.h; DESIGN.md "The bundled engine"): the engine
// attends to K/V where the daemon keeps it, and every block it computes becomes a cached block
// that other engines on the host (and this one after a preemption or restart) find.
//
// - A sequence's cached prefix: CachedPrefixBlocks looks its full blocks' keys up in kvtierd and
//   leases the leading run in the pool's tier (the daemon promotes T2 hits into it first). The
//   leases wait on the sequence until Admit attaches them or Release gives them back, so Admit
//   cannot fail; only the sequence asked last keeps them (asking for another gives them back).
//   They are read only: the engine computes from the end of the prefix on.
// - With a PrefixLoader (SetLoader), a prefix that is not all in the pool's tier yet is leased on
//   the loader's connection and thread first: CachedPrefixBlocks answers kPrefixLoading until
//   kvtierd has promoted it, and the engine's steps go on meanwhile (the scheduler admits the
//   sequences behind it too); then the run is leased here (a hit in the pool's tier, no copy)
//   and the loader gives its own leases back. One load at a time. A load starts only when the
//   pool holds the blocks it brings beside what this engine holds and the running sequences'
//   growth (SetGrowthReserve), or when this engine holds nothing: a load into a pool full of
//   running sequences' blocks fails part way (kvtierd cannot evict them), and the part that did
//   not come is computed again although T1 had it. Until it may start, CachedPrefixBlocks answers
//   kPrefixWaitsForRoom.
// - New blocks go into working slots (protocol v3 work_take), kept in a reserve: CanTake tops it
//   up from the daemon (within daemon.max_working_slots), Release returns a sequence's unpublished
//   slots to it (reserve_max at most; the rest are freed).
// - Commit queues each full block the step computed; EndStep hashes the step's blocks at once and
//   publishes them in one call, each under its key and parent with its XXH3-64 (a GPU sync and a
//   round trip per step, not per sequence); the block stays leased to this client while a sequence
//   holds it. A key the daemon caches
//   already stays a working slot of this sequence (its copy is equal; it is reused later).
// - Preemption is by offload: Release gives the leases back and the daemon may demote the blocks;
//   the sequence's next admission finds them as a prefix.
//
// Keys are the client's (Client::KeysFor over the namespace the client connected with), so the
// client's namespace must name this model, its KV dtype and block_tokens.
//
// Tier: T1 for the CPU backend (its pool is a view of T1: CpuPool), T0 for the GPU backend (its
// pool is a view of this process's mapping of T0: engine/daemon_t0.h), which hashes the blocks it
// publishes on the GPU (options.checksum). The daemon promotes a T1 or T2 hit into the pool's tier
// when the engine leases it.
//
// Errors: the "do it" calls cannot return one; the first daemon error is kept in status(), which
// LlmEngine checks after each schedule. Thread-safety: not thread-safe; one owner (the
// scheduler). The client must outlive this object and be used by nobody else meanwhile.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "client/kvtier_client.h"
#include "engine/cpu_kv_pool.h"
#include "engine/kv_blocks.h"
#include "engine/prefix_loader.h"

namespace kvtier::engine {

// XXH3-64 of each of the pool's slots `slots` (all of slot_bytes) into sums[i], once the work
// that wrote them is done.
using SlotChecksums =
    std::function<absl::Status(std::span<const uint32_t> slots, std::span<uint64_t> sums)>;

struct DaemonKvBlocksOptions {
  Tier tier = Tier::kT1;
  int32_t reserve_max = 64;  // unpublished working slots kept for reuse, at most
  // How Commit hashes the blocks it publishes. Empty: XXH3 on the CPU over the client's mapping
  // of T1 (T1 only; T0 needs one).
  SlotChecksums checksum;
  // The lowest tier a cached prefix is taken from: a block the lookup finds only below it ends
  // the prefix there (the rest is computed), e.g. kT1 where the disk reads slower than the GPU
  // computes. kT3: every tier.
  Tier lowest_prefix_tier = Tier::kT3;
};

// The calls DaemonKvBlocks makes to kvtierd (and its hashing of published blocks), for
// DaemonKvBlocksStats::call_ms.
enum class KvCall : uint8_t {
  kLookup,    // Lookup, LookupMany
  kLease,     // Get (leasing a prefix in the pool's tier)
  kRelease,   // Release of leases
  kTake,      // TakeWorkingSlots
  kFree,      // FreeWorking
  kPublish,   // PublishWorking
  kChecksum,  // hashing the blocks to publish (the GPU's, or XXH3 on the CPU)
  kKeys,      // KeysFor (hashing token blocks into keys, in this process)
};
inline constexpr size_t kKvCalls = 8;

// Counters, for tests, logs and the server's metrics.
struct DaemonKvBlocksStats {
  int64_t lookups = 0;             // prefix lookups sent (one per sequence looked up)
  int64_t lookup_batches = 0;      // LookupMany calls (LookAhead: one per scheduler step)
  int64_t leased_blocks = 0;       // prefix blocks leased (attached or not)
  int64_t loads = 0;               // prefixes handed to the PrefixLoader (not all in the tier)
  int64_t attached_blocks = 0;     // prefix blocks admitted into a sequence
  CachedBySource attached_from{};  // of those, by the tier the lookup found them in (blocks)
  int64_t published = 0;           // working slots published as cached blocks
  int64_t publish_calls = 0;       // PublishWorking calls (one per step that filled blocks)
  int64_t already_present = 0;     // publishes of a key the daemon had already
  int64_t working_taken = 0;       // working slots taken from the daemon
  int64_t working_freed = 0;       // working slots given back
  int64_t loads_deferred = 0;      // times a load waited for room in the pool before it started
  double call_ms[kKvCalls] = {};   // host time in each kind of call, by KvCall
};

// One line of the counters and the time by call, for a log.
std::string FormatStats(const DaemonKvBlocksStats& s);

// Adds the time from its construction to its destruction to stats.call_ms[call].
class KvCallTimer {
 public:
  KvCallTimer(DaemonKvBlocksStats& stats, KvCall call);
  ~KvCallTimer();
  KvCallTimer(const KvCallTimer&) = delete;
  KvCallTimer& operator=(const KvCallTimer&) = delete;

 private:
  DaemonKvBlocksStats& stats_;
  KvCall call_;
  std::chrono::steady_clock::time_point start_;
};

class DaemonKvBlocks final : public KvBlocks {
 public:
  // `slot_bytes`: one block's K/V bytes as the backend lays it out; the tier's slots must be
  // exactly that size (the pool is indexed slot * slot_bytes). InvalidArgument when they are not,
  // for block_tokens < 1, or for T0 without options.checksum; FailedPrecondition for T0 when the
  // daemon has none.
  static absl::StatusOr<std::unique_ptr<DaemonKvBlocks>> Create(
      client::Client* client, int64_t block_tokens, uint64_t slot_bytes,
      const DaemonKvBlocksOptions& options = {});
  // The CPU backend's pool: a view of the client's mapping of T1 (every slot).
  // InvalidArgument when T1's slots are not geometry's size in fp32.
  static absl::StatusOr<CpuKvPool> CpuPool(client::Client* client,
                                           const ops::PagedKvGeometry& geometry);
  ~DaemonKvBlocks() override;

  int64_t block_tokens() const override { return block_tokens_; }
  int32_t num_slots() const override { return num_slots_; }
  int32_t free_slots() const override { return static_cast<int32_t>(reserve_.size()); }

  // One LookupMany for the waiting sequences' prefixes; CachedPrefixBlocks in the same step
  // answers from it (and leases what it found).
  void LookAhead(std::span<Sequence* const> waiting) override;
  int64_t CachedPrefixBlocks(Sequence& seq) override;
  int64_t SlotsToAdmit(Sequence& seq, int64_t cached, int64_t end) override;
  int64_t SlotsToGrow(const Sequence& seq, int64_t end) const override;
  bool CanTake(int64_t slots) override;
  void Admit(Sequence& seq, int64_t cached, int64_t end) override;
  void Grow(Sequence& seq, int64_t end) override;
  void Commit(Sequence& seq, int64_t from) override;
  void EndStep() override;
  void Release(Sequence& seq) override;
  absl::Status status() const override { return status_; }
  // The tier's other blocks may be evicted, and other clients may give slots back.
  bool MayMakeRoomLater() const override { return true; }
  // Releases the waiting sequence's leased prefix, and gives up the load in flight.
  bool GiveBackUnadmitted() override;
  // Also starts the step's admission round (asked_step).
  void SetGrowthReserve(int64_t slots) override {
    growth_reserve_ = slots;
    ++round_;
  }

  const DaemonKvBlocksStats& stats() const { return stats_; }
  // Promote prefixes on `loader` (its own connection, in this client's namespace and the pool's
  // tier) from now on. Call before the first step.
  void SetLoader(std::unique_ptr<PrefixLoader> loader) { loader_ = std::move(loader); }

 private:
  // One block table entry's standing with the daemon.
  enum class Hold : uint8_t { kWorking, kLeased };
  struct State {
    std::vector<BlockKey> keys;  // keys of the sequence's first full blocks (computed lazily)
    std::vector<Hold> holds;     // per block table entry
    std::vector<uint32_t> pending_slots;    // prefix leased by CachedPrefixBlocks, not admitted
    std::vector<CacheSource> pending_from;  // where the lookup found each of them
    // The last lookup's answer (LookAhead's or CachedPrefixBlocks'), in step looked_step: used
    // for kLookupFreshSteps steps (a hint; the lease checks again), dropped once a lease or load
    // starts from it. With a loader, an answer from an earlier step that says the hit is all in
    // the pool's tier is not used for the lease: asked again first (CachedPrefixBlocks).
    std::optional<client::LookupResult> looked;
    uint64_t looked_step = 0;
    uint64_t load_ticket = 0;             // the loader's job for the prefix, or 0
    uint64_t asked_round = ~uint64_t{0};  // the admission round it was last asked about in
    std::vector<CacheSource> load_from;   // where the lookup found each block of that job
  };
  DaemonKvBlocks(client::Client* client, int64_t block_tokens, uint64_t slot_bytes,
                 int32_t num_slots, const DaemonKvBlocksOptions& options);

  // The full blocks of seq a prefix lookup covers: at least one token is left to compute.
  int64_t LookupLimit(const Sequence& seq) const;
  // The keys of seq's first `n` full blocks (n <= num_tokens / block_tokens).
  const std::vector<BlockKey>* KeysUpTo(Sequence& seq, State& st, int64_t n);
  void ReleaseKeys(const std::vector<BlockKey>& keys);
  // Leases `keys` in the pool's tier; keeps the leading run as st's pending prefix (found in
  // from[i]) and gives back what lies past its first gap. Returns the run's length.
  int64_t LeaseRun(State& st, absl::Span<const BlockKey> keys, std::span<const CacheSource> from);
  // CachedPrefixBlocks of a sequence whose prefix the loader has: kPrefixLoading until it is
  // done, then its run leased here.
  int64_t LoadedPrefix(State& st);
  // The leading blocks of a lookup's hit that lie in the tiers options_.lowest_prefix_tier allows.
  size_t UsableRun(const client::LookupResult& where) const;
  // Whether a load that brings `slots` blocks into the pool should start now (the class comment).
  bool RoomToLoad(int64_t slots) const;
  // Whether st.looked is recent enough to use (kLookupFreshSteps).
  bool Fresh(const State& st) const;
  // Whether a lookup's usable hit is non-empty and all in the pool's tier already (a lease, no
  // load).
  bool HitInPool(const client::LookupResult& where) const;
  // Hashes and publishes what Commit queued (EndStep, and Release before it gives slots back).
  void PublishQueued();
  // Gives back sequence id's leased prefix that no admission took.
  void DropLeases(uint64_t id);
  // Gives up the load in flight (the loader gives its leases back); false when there was none.
  bool DropLoad();
  // Whether a load may start: none is in flight, or the one there is done and its sequence was
  // not asked in this admission round (it is behind the one asking; dropped here). One at a time.
  bool LoaderFree();
  // Whether the load in flight (loading_) is done.
  bool LoadDone();
  void Fail(const absl::Status& s);
  // A block queued by Commit: the sequence and its block table index.
  struct Queued {
    uint64_t id;
    size_t at;
  };
  // XXH3-64 of the slots (options_.checksum, or the CPU over T1).
  absl::Status Checksums(std::span<const uint32_t> slots, std::span<uint64_t> sums);

  client::Client* client_;
  int64_t block_tokens_;
  uint64_t slot_bytes_;
  int32_t num_slots_;
  DaemonKvBlocksOptions options_;
  TierMask prefix_tiers_;  // the pool's tier and those up to options_.lowest_prefix_tier
  std::vector<uint32_t> reserve_;
  absl::flat_hash_map<uint64_t, State> states_;  // by sequence id
  uint64_t pending_owner_ = 0;                   // the sequence whose prefix is leased, or 0
  uint64_t loading_ = 0;                         // the sequence whose prefix is loading, or 0
  uint64_t step_ = 0;                            // EndStep calls so far
  int64_t growth_reserve_ = 0;                   // SetGrowthReserve's
  uint64_t round_ = 0;  // admission rounds (SetGrowthReserve calls: one per step that admits)
  std::vector<protocol::WorkPublishItem> queued_items_;  // Commit's, for EndStep
  std::vector<Queued> queued_;                           // whose each of them is
  DaemonKvBlocksStats stats_;
  absl::Status status_;
  std::unique_ptr<PrefixLoader> loader_;  // null: prefixes are promoted inline
};

}  // namespace kvtier::engine
