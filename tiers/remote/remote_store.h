// RemoteStore: the remote tier's store (DESIGN.md "The remote tier", issue 15): blocks kept by key
// in a Redis-protocol store (Redis 7 standalone or Cluster, Valkey, ...) that the hosts of a fleet
// share. Key-addressed, not slot-addressed: the store evicts by its own maxmemory-policy, so any
// block may vanish at any time, and a vanished block is a plain miss.
//
// Keys and values. A block's key in the store is key_prefix + BlockKey::Bytes() (16 raw bytes);
// the caller passes namespace-scoped keys (the daemon's keys under the fleet's key-scope secret),
// so daemons that share the secret and the prefix share blocks and namespaces stay apart. A value
// is the header of remote_value.h plus the payload. Every Get checks the header against the key
// and namespace asked for and the payload against its XXH3-64: the value is received straight into
// the caller's dst (resp_connection.h ReadBulk: header apart, payload in place, no other copy) and
// hashed there. A value that fails (short, odd, of another key or namespace, wrong checksum) is a
// miss, counted in corrupt_values and logged, and its bytes are never reported as a hit; dst then
// holds undefined bytes (never more than dst_bytes of them).
//
// Outcomes and errors. Each item of a batch ends as a hit, a miss or an error; a call returns OK
// when no item is an error (misses are normal), else the first item error (codes as in
// resp_connection.h). While the store is unavailable (circuit_breaker.h), calls return Unavailable
// at once and every item is an error; the breaker probes by itself and a later call succeeds when
// the store is back. A node that is down while the rest of a cluster answers fails only its own
// keys (fast, through its reconnect back-off), and after a failover the slot map follows (MOVED).
//
// Blocking and threads. Every call blocks its thread on network I/O: one round trip per
// max_pipeline commands per node, each read or write bounded by command_timeout_ms (a node that is
// down costs a connect attempt or nothing, in back-off). Call it from worker threads, never from a
// thread that serves clients' rings. Every method may be called from any thread at once;
// concurrent calls use separate pooled connections.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"
#include "common/status.h"
#include "tiers/remote/circuit_breaker.h"
#include "tiers/remote/cluster_router.h"
#include "tiers/remote/remote_store_options.h"
#include "tiers/storage_tier.h"

namespace kvtier {

enum class RemoteOutcome : uint8_t {
  kError = 0,  // no answer for this item (see the call's status)
  kHit = 1,    // Get: the payload is in dst; Exists: present; Put: stored
  kMiss = 2,   // Get/Exists: not in the store, or (Get) not a valid value for this key
};

struct RemotePutItem {
  // key, namespace_id, payload_bytes, and checksum (the payload's XXH3-64; 0: computed here).
  // With verify_puts, a payload that does not match a given checksum is not stored (the item fails
  // with DataLoss); without, it is stored as given and every reader counts it corrupt (a miss).
  BlockRecord record;
  const void* payload = nullptr;  // record.payload_bytes bytes, sent from here (never copied)
  RemoteOutcome outcome = RemoteOutcome::kError;  // out: kHit when stored
};

struct RemoteGetItem {
  BlockKey key;
  uint64_t namespace_id = 0;  // the value must carry this namespace id
  void* dst = nullptr;        // dst_bytes bytes; on kHit, its first record.payload_bytes hold the
  uint32_t dst_bytes = 0;     // payload; on any other outcome its contents are undefined
  RemoteOutcome outcome = RemoteOutcome::kError;  // out
  BlockRecord record;                             // out, on kHit
};

// Call latencies (one observation per call, whatever its size), as cumulative-ready buckets: the
// Prometheus exporter adds the differences of two snapshots (Histogram::ObserveMultiple).
struct RemoteLatency {
  static constexpr std::array<double, 12> kBoundsSeconds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};
  std::array<uint64_t, kBoundsSeconds.size() + 1> buckets{};  // [i]: <= bound i; last: +Inf
  uint64_t count = 0;
  double sum_seconds = 0;
};

struct RemoteStoreStats {
  uint64_t get_items = 0, hits = 0, misses = 0;
  uint64_t corrupt_values = 0;   // values that failed the header or checksum check (misses too)
  uint64_t oversize_values = 0;  // valid values larger than the caller's dst_bytes (misses too)
  uint64_t put_items = 0, stored = 0;
  uint64_t exists_items = 0, exists_found = 0;
  uint64_t delete_items = 0;
  uint64_t bytes_read = 0;     // payload bytes of hits
  uint64_t bytes_written = 0;  // payload bytes stored
  // Item errors by kind (resp_connection.h's codes): DeadlineExceeded, Unavailable, Internal,
  // Unauthenticated, Aborted (error replies), and puts refused for a checksum mismatch.
  uint64_t errors_timeout = 0, errors_connection = 0, errors_protocol = 0, errors_auth = 0,
           errors_server = 0, errors_bad_put = 0;
  CircuitBreaker::Stats breaker;  // available, opens, closes, refused (calls failed fast)
  RouterStats router;             // redirects, map refreshes, connects, nodes serving and up
  RemoteLatency get_latency, put_latency, exists_latency, delete_latency;
};

class RemoteStore {
 public:
  // Validates `options` (the error names the setting) and makes the store. Connects to nothing: a
  // store that is down at start makes the first calls fail, then the breaker opens.
  static absl::StatusOr<std::unique_ptr<RemoteStore>> Open(const RemoteStoreOptions& options);
  ~RemoteStore();

  // Stores every item (SET, pipelined), overwriting what the key held.
  absl::Status Put(absl::Span<RemotePutItem> items);
  // Reads every item (GET, pipelined) into its dst, verified as above.
  absl::Status Get(absl::Span<RemoteGetItem> items);
  // present[i] = kHit / kMiss / kError for keys[i] (EXISTS, pipelined). present.size() ==
  // keys.size(). A key present here may still be evicted before a Get.
  absl::Status Exists(absl::Span<const BlockKey> keys, absl::Span<RemoteOutcome> present);
  // Exists with sizes, for the daemon's lookups (STRLEN, pipelined): payload_bytes[i] = the
  // payload size the value of keys[i] claims (its length less the header), 0 when absent or too
  // short to be a value; present[i] as for Exists. Counted as exists_items / exists_found, timed
  // in exists_latency. The size is a claim: a Get still verifies the value.
  absl::Status Probe(absl::Span<const BlockKey> keys, absl::Span<RemoteOutcome> present,
                     absl::Span<uint32_t> payload_bytes);
  // Deletes every key (DEL, pipelined); a key not there is not an error.
  absl::Status Delete(absl::Span<const BlockKey> keys);

  // The store key of `key`: key_prefix + BlockKey::Bytes(). For tools and tests.
  std::string StoreKey(const BlockKey& key) const;
  // Stats() walks the cluster's slot map; these two are cheap, for per-operation checks.
  // available(): the breaker is closed (not while it is open or probing).
  bool available() const { return breaker_.GetStats().available; }
  uint64_t corrupt_values() const;
  RemoteStoreStats Stats() const;

 private:
  class Counters;
  RemoteStore(const RemoteStoreOptions& options, ClusterRouterOptions router);
  // Runs one batch through the breaker: fails every item fast while it is open.
  enum class Op { kGet, kPut, kExists, kDelete };
  absl::Status Run(Op op, absl::Span<const RespRequest> requests,
                   absl::FunctionRef<absl::Status(size_t, const RespAnswer&)> on_reply);
  absl::Status PutSlice(absl::Span<RemotePutItem> items);
  absl::Status FormatSet(const RemotePutItem& item, const std::string& key,
                         std::string& head) const;
  class GetSink;
  absl::Status OnGetReply(RemoteGetItem& item, const GetSink& sink, const RespAnswer& answer);
  void Corrupt(const RemoteGetItem& item, const RespEndpoint& node, const absl::Status& why);

  const std::string key_prefix_;
  const bool verify_puts_;
  const size_t put_slice_;  // puts formatted at once: bounds the memory of a large Put
  ClusterRouter router_;
  CircuitBreaker breaker_;
  std::unique_ptr<Counters> counters_;
};

}  // namespace kvtier
