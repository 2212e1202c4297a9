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

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "daemon/key_scope.h"
#include "index/namespace.h"
#include "tiers/nvme_verify_pool.h"
#include "tiers/tier_manager.h"

namespace kvtier {

class DaemonMetrics;
class LookupRecorder;

// One block's outcome, as the protocol reports it.
enum class BlockStatus : uint8_t {
  kOk = 0,
  kAlreadyPresent = 1,  // put_begin/put_commit: stored by someone already; nothing to do
  kRetry = 2,           // no room right now (T1 full of leased blocks); try again later
  kNotFound = 3,        // get/drop/release: not cached (any more)
  kCorrupt = 4,         // get: its only copy failed its checksum and is gone (counted)
  kBusy = 5,            // drop: leased by someone
  kInvalid = 6,         // the client broke the protocol for this block (see each method)
  kError = 7,           // the daemon failed (an I/O error, logged)
  kBadChecksum = 8,     // put_commit: the slot's payload does not match the checksum; discarded
};

struct GetResult {
  BlockStatus status = BlockStatus::kError;
  SlotId slot = kNoSlot;  // kOk: the T1 slot holding the payload, leased to this session
  uint32_t payload_bytes = 0;
};
using GetBatchDone = std::function<void(std::vector<GetResult>)>;

struct PutBeginResult {
  BlockStatus status = BlockStatus::kError;  // kOk, kAlreadyPresent, kRetry or kInvalid
  SlotId slot = kNoSlot;                     // kOk: the T1 slot to fill, this session's
};

struct PutBeginItem {
  BlockKey key;
  std::optional<BlockKey> parent;  // the block before it in its sequence; none for the first
  uint32_t payload_bytes = 0;      // what the client will write, 1..slot_bytes
};

struct PutCommitItem {
  BlockKey key;
  uint64_t checksum = 0;  // XXH3-64 of the payload as written; 0 = not given (not verified)
};

// Counters since start, over every session.
struct ServiceStats {
  uint64_t lookups = 0, lookup_keys = 0, lookup_hit_blocks = 0;
  uint64_t gets = 0, get_blocks = 0;
  uint64_t puts_begun = 0, puts_committed = 0, puts_aborted = 0, puts_retry = 0;
  uint64_t releases = 0, drops = 0, requests_invalid = 0;
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

 private:
  friend class Service;
  Session(class Service& service, const Namespace& ns, const BlockKey& root, uint64_t id)
      : service_(service), ns_(ns), root_(root), id_(id) {}

  class Service& service_;
  const Namespace ns_;
  const BlockKey root_;
  const uint64_t id_;
  struct OpenPut {
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
  // (kInvalid). Idempotent. Gets still in flight release their leases when they complete.
  void Close(Session& session);

  // Longest cached prefix of `keys` (DESIGN.md "Lookup"): returns n, and tiers[i] for i < n.
  // Takes no lease. Precondition: tiers.size() >= keys.size().
  size_t Lookup(Session& session, absl::Span<const BlockKey> keys, absl::Span<TierMask> tiers);
  // Leases each of `keys` and makes sure it is in `tier` (T1, or T0 when the daemon has one;
  // promoting as needed), then calls `done` once with one result per key: kOk (a slot of `tier`
  // leased until Release), kNotFound, kCorrupt, kRetry or kError.
  void Get(const std::shared_ptr<Session>& session, absl::Span<const BlockKey> keys, Tier tier,
           GetBatchDone done);
  void Get(const std::shared_ptr<Session>& session, absl::Span<const BlockKey> keys,
           GetBatchDone done) {
    Get(session, keys, Tier::kT1, std::move(done));
  }
  // Gives back one lease per key. kInvalid for a key this session holds no lease on.
  std::vector<BlockStatus> Release(Session& session, absl::Span<const BlockKey> keys);

  // Phase one of a store: a T1 slot per item for the client to fill (kOk), or kAlreadyPresent
  // (cached: skip it; also a key repeated in `items` after the occurrence given a slot, so a
  // block is written once), kRetry (T1 full; nothing was reserved for that key), kInvalid (this
  // session has a put of that key open from an earlier request, or a payload size of 0 or above a
  // slot).
  std::vector<PutBeginResult> PutBegin(Session& session, absl::Span<const PutBeginItem> items);
  // Phase two: verifies each slot against its checksum (when given) and publishes it. Per item:
  // kOk, kAlreadyPresent (slot freed; also a key repeated in `items` after an occurrence that was
  // published or present), kBadChecksum (discarded, slot freed), or kInvalid (no open put of that
  // key). A block is visible to lookups only from here on.
  std::vector<BlockStatus> PutCommit(Session& session, absl::Span<const PutCommitItem> items);
  // Gives back slots of open puts that will not be committed. kInvalid for a key with no open put.
  std::vector<BlockStatus> PutAbort(Session& session, absl::Span<const BlockKey> keys);

  // Removes blocks from every tier: kOk, kNotFound, or kBusy (leased).
  std::vector<BlockStatus> Drop(Session& session, absl::Span<const BlockKey> keys);

  // A client sent a malformed request (the server closes it); counted here for stats.
  void CountInvalidRequest() { requests_invalid_.fetch_add(1, std::memory_order_relaxed); }
  ServiceStats Stats() const;

  size_t sessions() const { return sessions_.load(std::memory_order_relaxed); }
  uint64_t leases_held() const { return leases_.load(std::memory_order_relaxed); }
  TierManager& tiers() const { return tiers_; }

 private:
  friend class Session;
  void ReleaseAll(Session& session) ABSL_LOCKS_EXCLUDED(session.mu_);
  // Records the outcome of one block of a Get for `session` (a lease, unless the session closed).
  GetResult SettleGet(Session& session, const BlockKey& key, absl::StatusOr<LeasedBlock> got)
      ABSL_LOCKS_EXCLUDED(session.mu_);
  BlockStatus BeginOne(Session& session, const PutBeginItem& item, SlotId* slot_out)
      ABSL_LOCKS_EXCLUDED(session.mu_);
  // put_commit in three steps: take each item's open put from the session; hash the payloads
  // (on verify_pool_ when the commit is large); publish or refuse each.
  struct Committing {
    BlockKey key;
    Session::OpenPut put;
    bool open = false;     // the session had this put open
    bool bad_sum = false;  // verify_puts found the payload differs from the checksum
  };
  void TakeOpenPuts(Session& session, absl::Span<const PutCommitItem> items,
                    std::vector<Committing>& out) ABSL_LOCKS_EXCLUDED(session.mu_);
  void VerifyPayloads(absl::Span<const PutCommitItem> items, std::vector<Committing>& puts);
  BlockStatus Publish(Session& session, const PutCommitItem& item, Committing& c);

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
};

}  // namespace kvtier
