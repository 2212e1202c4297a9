// Service: the daemon's operations, independent of the wire (DESIGN.md "Data flow"). The server
// decodes a client's requests and calls these; they scope keys by the client's namespace
// (key_scope.h), drive the tier manager, and keep each session's leases and uncommitted puts so
// that a client that goes away, however it goes, loses them and nobody else notices.
//
// Keys in and out of every method are the client's keys; daemon keys never leave this layer.
//
// Thread-safety: every method may be called from any thread, also for one session at once. Get's
// `done` runs on the caller's thread when every block was already in T1, else on a T2 completion
// thread; it must not block.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/protocol/record_codec.h"
#include "daemon/key_scope.h"
#include "index/namespace.h"
#include "kernels/gpu_runtime.h"
#include "tiers/nvme_verify_pool.h"
#include "tiers/tier_manager.h"

namespace kvtier {

class DaemonMetrics;
class LookupRecorder;

// Per-block outcomes are the wire's (protocol::BlockCode, docs/protocol.md "Block codes"): the
// service decides each block's code once and the dispatcher writes it as it is. Each method says
// which codes it answers.

// A block's outcome with the slot it got: a get's (a slot of the tier read, leased to the
// session), a put_begin's (a slot to fill) or a work_take's (a working slot). slot and
// payload_bytes only with kOk.
struct SlotResult {
  protocol::BlockCode code = protocol::BlockCode::kFailed;
  SlotId slot = kNoSlot;
  uint32_t payload_bytes = 0;  // get, work_publish: the payload's bytes; put_begin: as asked;
                               // work_take: the slot's bytes
};
using GetBatchDone = std::function<void(std::vector<SlotResult>)>;

// Counters since start, over every session, and the state the stats op reports.
struct ServiceStats {
  uint64_t lookups = 0, lookup_keys = 0, lookup_hit_blocks = 0;
  uint64_t gets = 0, get_blocks = 0;
  uint64_t promotions = 0;  // T1 gets that had to bring the block up from a lower tier
  uint64_t puts_begun = 0, puts_committed = 0, puts_aborted = 0, puts_retry = 0;
  uint64_t releases = 0, drops = 0, requests_invalid = 0;
  uint64_t t1_slots_total = 0, t1_slots_free = 0;
  uint64_t leases_held = 0;    // now
  uint64_t working_slots = 0;  // now, over every session
  uint64_t work_taken = 0, work_published = 0, work_freed = 0, work_over_quota = 0;
};

// T1 as clients map it (the Welcome's T1 fields and its first fd).
struct T1Segment {
  int fd = -1;  // the tier's own: valid while the service's tier manager lives
  uint64_t bytes = 0;
  uint32_t slot_bytes = 0;
  uint32_t slots = 0;
};

// T0 as clients on its GPU open it (the Welcome's T0 fields).
struct T0Pool {
  int device = 0;          // in this process's numbering
  std::string pci_bus_id;  // how a client finds the same GPU in its own numbering
  uint64_t bytes = 0;
  uint32_t slot_bytes = 0;
  uint32_t slots = 0;
  gpu::IpcHandle ipc_handle;  // of the whole pool
};

// One client connection's state. Created by Service::Open; Service::Close (or the destructor)
// gives back everything it holds.
class Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint64_t id() const { return id_; }
  const Namespace& ns() const { return ns_; }
  uint64_t namespace_id() const { return root_.lo; }
  size_t leases_held() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t puts_pending() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t working_slots() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class Service;
  Session(class Service& service, const Namespace& ns, const BlockKey& root, uint64_t id)
      : service_(service), ns_(ns), root_(root), id_(id) {}

  class Service& service_;
  const Namespace ns_;
  const BlockKey root_;
  const uint64_t id_;
  struct OpenPut {
    Tier tier = Tier::kT1;
    SlotId slot = kNoSlot;
    uint32_t payload_bytes = 0;
    std::optional<BlockKey> parent;  // daemon key
    std::chrono::steady_clock::time_point begun;
  };
  // Held only around the session's own bookkeeping, never across a tier manager call that may
  // wait (AllocateForPut never waits).
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<BlockKey, uint32_t> leases_ ABSL_GUARDED_BY(mu_);  // daemon key -> leases
  absl::flat_hash_map<BlockKey, OpenPut> pending_puts_ ABSL_GUARDED_BY(mu_);  // daemon key -> put
  // Unkeyed working slots (protocol v3), [0] T0 and [1] T1.
  std::array<absl::flat_hash_set<SlotId>, 2> working_ ABSL_GUARDED_BY(mu_);
};

// A put_commit carrying at least this many payload bytes is verified on the pool.
inline constexpr uint64_t kParallelVerifyBytes = uint64_t{8} << 20;

struct ServiceOptions {
  // put_commit hashes each slot and refuses one that does not match the client's checksum
  // (kBadChecksum), so a torn or wrong copy is never published. Off, a put costs one pass over its
  // bytes less; a wrong payload is then caught only when the block is demoted (re-hashed against
  // the committed checksum and dropped) or read back from T2.
  bool verify_puts = false;  // the daemon.verify_puts default (docs/configuration.md)
  // Threads that hash the payloads of one large put_commit in parallel (a commit of at least
  // kParallelVerifyBytes); 0: every commit is hashed on its connection's own thread.
  uint32_t verify_threads = 4;
  // Most working slots (T0 and T1 together) one session may hold; 0: none (work_take answers
  // kOverQuota). The daemon.max_working_slots default.
  uint32_t max_working_slots = 256;
  // The pool this service serves, when the daemon runs several ([[pools]]): every session's
  // namespace root becomes KeyScope::InPool(root, pool_scope), so its daemon keys are the pool's
  // own. Empty: the namespace root as is (the single [pool]).
  std::string pool_scope{};
};

class Service {
 public:
  // `recorder` (may be null) gets every lookup (kvtierd --record); `metrics` (may be null) every
  // event the request path sees. All must outlive the service.
  Service(TierManager& tiers, const KeyScope& scope, LookupRecorder* recorder,
          DaemonMetrics* metrics = nullptr, const ServiceOptions& options = {});
  ~Service();

  // A session for a client that declared `ns`. InvalidArgument naming the field for a bad one.
  absl::StatusOr<std::shared_ptr<Session>> Open(const Namespace& ns);
  // Releases the session's leases and aborts its uncommitted puts; later calls on it are refused
  // (kMissing: nothing is the session's any more). Idempotent. Gets still in flight release their
  // leases when they complete.
  void Close(Session& session);

  // --- What clients see of the tiers ---
  // The largest payload a put may carry (a T1 slot).
  uint32_t slot_bytes() const;
  // Whether gets may read from T0 (this daemon runs a GPU tier).
  bool has_t0() const;
  T1Segment t1_segment() const;
  std::optional<T0Pool> t0_pool() const;  // nullopt without a T0

  // --- Ops ---
  // Longest cached prefix of `keys` (DESIGN.md "Lookup"): returns n, and tiers[i] for i < n.
  // Takes no lease. Precondition: tiers.size() >= keys.size().
  size_t Lookup(Session& session, absl::Span<const BlockKey> keys, absl::Span<TierMask> tiers);
  // Leases each of `keys` and makes sure it is in `tier` (T1, or T0 when has_t0(); promoting as
  // needed), then calls `done` once with one result per key: kOk (a slot of `tier` leased until
  // Release), kMissing (not cached, its only copy failed its checksum and is gone, or the session
  // closed meanwhile), kRetryLater (no room in `tier` now) or kFailed (an I/O error, logged).
  void Get(const std::shared_ptr<Session>& session, absl::Span<const BlockKey> keys, Tier tier,
           GetBatchDone done);
  void Get(const std::shared_ptr<Session>& session, absl::Span<const BlockKey> keys,
           GetBatchDone done) {
    Get(session, keys, Tier::kT1, std::move(done));
  }
  // Gives back one lease per key: kOk, or kMissing for a key this session holds no lease on.
  std::vector<protocol::BlockCode> Release(Session& session, absl::Span<const BlockKey> keys);

  // Phase one of a store into `tier` (T1, or T0 when has_t0()), per item: kOk (a slot of `tier` to
  // fill, leased to the session), or
  // kAlreadyPresent (cached: skip it; also a key repeated in `items` after the occurrence given a
  // slot, so a block is written once), kRetryLater (T1 full; nothing was reserved for that key),
  // kMissing (this session has a put of that key open from an earlier request), or kFailed (a
  // payload size of 0 or above slot_bytes(); the wire's decoder refuses such a request first).
  std::vector<SlotResult> PutBegin(Session& session, absl::Span<const protocol::PutBeginItem> items,
                                   Tier tier = Tier::kT1);
  // Phase two: verifies each slot against its checksum (when given and verify_puts; T1 slots only:
  // a T0 payload is checked when it is first written to T2) and publishes it. Per item:
  // kOk, kAlreadyPresent (slot freed; also a key repeated in `items` after an occurrence that was
  // published or present), kBadChecksum (discarded, slot freed), kMissing (no open put of that
  // key) or kFailed (the tier manager refused it; slot freed). A block is visible to lookups only
  // from here on.
  std::vector<protocol::BlockCode> PutCommit(Session& session,
                                             absl::Span<const protocol::PutCommitItem> items);
  // Gives back slots of open puts that will not be committed: kOk, or kMissing for a key with no
  // open put.
  std::vector<protocol::BlockCode> PutAbort(Session& session, absl::Span<const BlockKey> keys);

  // --- Working slots (protocol v3; DESIGN.md "Data flow", Store) ---
  // `count` unkeyed slots of `tier` (T1, or T0 when has_t0()) for the session to fill before it
  // knows their keys, per slot: kOk (the slot, leased to the session until published or freed;
  // payload_bytes = the slot's size), kOverQuota (the session holds max_working_slots) or
  // kRetryLater (the tier is full now).
  std::vector<SlotResult> WorkTake(Session& session, Tier tier, uint32_t count);
  // Makes working slots of `tier` cached blocks, per item: kOk (published under its key and
  // parent and leased to the session: Release it when done reading; no longer a working slot),
  // kAlreadyPresent (the key is in `tier` already, or on its way there: the slot stays a working
  // slot), kBadChecksum (verify_puts, T1: the slot differs from the checksum; it stays a working
  // slot), kMissing (not a working slot of this session; also a slot repeated after an earlier
  // occurrence), kRetryLater (the index is full) or kFailed (payload size out of range).
  std::vector<SlotResult> WorkPublish(Session& session, Tier tier,
                                      absl::Span<const protocol::WorkPublishItem> items);
  // Gives working slots back unpublished: kOk, or kMissing (not a working slot of the session).
  std::vector<protocol::BlockCode> WorkFree(Session& session, Tier tier,
                                            absl::Span<const uint32_t> slots);

  // Removes blocks from every tier: kOk, kMissing (not cached), or kLeased.
  std::vector<protocol::BlockCode> Drop(Session& session, absl::Span<const BlockKey> keys);

  // A client sent a malformed request (the server closes it); counted here for stats.
  void CountInvalidRequest() { requests_invalid_.fetch_add(1, std::memory_order_relaxed); }
  ServiceStats Stats() const;

  size_t sessions() const { return sessions_.load(std::memory_order_relaxed); }
  uint64_t leases_held() const { return leases_.load(std::memory_order_relaxed); }

 private:
  friend class Session;
  void ReleaseAll(Session& session) ABSL_LOCKS_EXCLUDED(session.mu_);
  // Records the outcome of one block of a Get for `session` (a lease, unless the session closed).
  SlotResult SettleGet(Session& session, const BlockKey& key, absl::StatusOr<LeasedBlock> got)
      ABSL_LOCKS_EXCLUDED(session.mu_);
  // Whether a put of `key` (a daemon key) has nothing to store: the block is cached in some tier.
  // The one place the service decides it (CommitPut applies the same rule when it publishes).
  bool AlreadyPresent(const BlockKey& key) const;
  // put_begin of items[i] (`begun` holds the outcomes of the items before it).
  SlotResult BeginOne(Session& session, absl::Span<const protocol::PutBeginItem> items, size_t i,
                      absl::Span<const SlotResult> begun, Tier tier)
      ABSL_LOCKS_EXCLUDED(session.mu_);
  // Opens the put of `key` in the session: its slot, or the code why not.
  SlotResult OpenPutLocked(Session& session, const BlockKey& key,
                           const protocol::PutBeginItem& item, Tier tier)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu_);
  // Records one lease of `key` for the session; false when it closed (the caller releases).
  bool HoldLease(Session& session, const BlockKey& key) ABSL_LOCKS_EXCLUDED(session.mu_);
  // One work_publish item: takes the slot out of the session, publishes, gives it back on refusal.
  SlotResult PublishOne(Session& session, Tier tier, const protocol::WorkPublishItem& item)
      ABSL_LOCKS_EXCLUDED(session.mu_);
  // put_commit in three steps: take each item's open put from the session; hash the payloads
  // (on verify_pool_ when the commit is large); publish or refuse each.
  struct Committing {
    BlockKey key;
    Session::OpenPut put;
    bool open = false;     // the session had this put open
    bool bad_sum = false;  // verify_puts found the payload differs from the checksum
  };
  void TakeOpenPuts(Session& session, absl::Span<const protocol::PutCommitItem> items,
                    std::vector<Committing>& out) ABSL_LOCKS_EXCLUDED(session.mu_);
  void VerifyPayloads(absl::Span<const protocol::PutCommitItem> items,
                      std::vector<Committing>& puts);
  protocol::BlockCode Publish(Session& session, const protocol::PutCommitItem& item, Committing& c);

  TierManager& tiers_;
  const KeyScope& scope_;
  LookupRecorder* const recorder_;
  DaemonMetrics* const metrics_;
  const ServiceOptions options_;
  std::unique_ptr<VerifyPool> verify_pool_;  // null when verify_threads is 0
  std::atomic<uint64_t> next_session_id_{1};
  std::atomic<size_t> sessions_{0};
  std::atomic<uint64_t> leases_{0};
  std::atomic<uint64_t> lookups_{0}, lookup_keys_{0}, lookup_hit_blocks_{0};
  std::atomic<uint64_t> gets_{0}, get_blocks_{0};
  std::atomic<uint64_t> puts_begun_{0}, puts_committed_{0}, puts_aborted_{0}, puts_retry_{0};
  std::atomic<uint64_t> releases_{0}, drops_{0}, requests_invalid_{0};
  std::atomic<uint64_t> working_slots_{0};
  std::atomic<uint64_t> work_taken_{0}, work_published_{0}, work_freed_{0}, work_over_quota_{0};
};

}  // namespace kvtier
