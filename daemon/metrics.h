// DaemonMetrics: kvtierd's Prometheus metrics (DESIGN.md "Process model and protocol", Metrics;
// every metric is listed in docs/metrics.md). Two sources feed one /metrics page:
//
//  * Events only the request path sees — lookups and their hits per tier, bytes clients copied in
//    and out of T1, transfer latencies, connected clients, leases held — are recorded by the op
//    layer through the On*/Add*/Set* calls below. They are prometheus-cpp counters, gauges and
//    histograms whose objects are looked up once, at construction: a call is an atomic update
//    (a histogram observation takes that histogram's own short mutex), never a family lookup.
//    The tier manager reports its promotions and demotions the same way (ObserveTierMove, from
//    TierManagerOptions::on_move, on the thread completing each move).
//  * What the tier manager and the tiers already count — puts, gets, evictions, demotions,
//    admissions rejected, checksum failures, bytes moved T1<->T2, capacity and occupancy — is read
//    from TierManager::Stats() and TierStats when Prometheus scrapes (WatchTiers), so nothing goes
//    stale, nothing is counted twice, and there is no polling thread.
//
// The HTTP endpoint is prometheus-cpp's exposer (civetweb), bound to the configured address;
// loopback by default because the page says how busy each tier is and nothing more is needed by a
// local Prometheus or node agent. Each connection holds one of its threads until it has sent its
// request and taken the answer, or until the request timeout: with civetweb's defaults (2 threads,
// 30 s) two idle connections made every scrape time out, so both are MetricsHttpOptions.
//
// Memory pools. A daemon of several pools (Create's `pools`) has a set of request-path series per
// pool, labelled {pool="<name>"}, each recorded through its own ForPool object (its service's and
// its tier manager's), and its tier families labelled the same way (WatchPools).
//
// Thread-safety: every method may be called from any thread at any time, concurrently with
// scrapes. Lifetime: WatchTiers(nullptr) must be called (or the DaemonMetrics destroyed) before
// the watched TierManager is destroyed.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "index/block_index.h"

namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace kvtier {

class RemoteTier;
class TierManager;
struct TierMove;

namespace internal {
class MetricsCollector;
}

inline constexpr char kDefaultMetricsAddress[] = "127.0.0.1:9464";

// One memory pool whose tiers the page shows (DaemonMetrics::WatchPools).
struct WatchedPool {
  std::string name;  // the `pool` label of its tier families; empty: no label (a single pool)
  const TierManager* manager = nullptr;  // not null
  const RemoteTier* remote = nullptr;    // the manager's T3, for its store's counters; may be null
};

// How the endpoint serves connections (docs/configuration.md, [metrics]).
struct MetricsHttpOptions {
  // Connections served at once; more wait for a thread. Idle or slow peers each hold one for at
  // most request_timeout_ms, so a scrape waits at most about
  // ceil(peers ahead of it / threads) * request_timeout_ms.
  uint32_t threads = 8;
  // A connection must send its whole request within this, and each answer's write must finish
  // within it; then it is closed. Keep-alive stays off: one request per connection.
  uint32_t request_timeout_ms = 2000;
};

// Request latency series (kvtier_transfer_seconds{op}). Moves between tiers have their own series
// (op = promote or demote, with a direction), fed by ObserveTierMove.
enum class TransferOp : uint8_t {
  kGet = 0,  // a get request, from arrival to its blocks leased in T1 (promotions included)
  kPut = 1,  // a put, from put_begin to put_commit
};
inline constexpr int kNumTransferOps = 2;

// The block moves between tiers that get a kvtier_transfer_seconds{op, direction} series:
// promote t2_to_t1, t0_to_t1, t1_to_t0, t3_to_t1; demote t1_to_t2, t0_to_t1, t2_to_t3, t1_to_t3
// (TierMove in
// tiers/tier_manager_options.h). Only those between tiers the daemon has are registered.
inline constexpr int kNumTierMoves = 8;

// Copies the daemon sees but does not do itself (clients copy to and from T1 and T0 in their own
// process), for kvtier_moved_bytes_total{direction}. Moves between tiers (T0<->T1, T1<->T2) are
// not here: the tiers count them (metrics_tiers.cc).
enum class CopyDirection : uint8_t {
  kClientToT1 = 0,  // a client filled a T1 slot it then committed (put)
  kT1ToClient = 1,  // a client was leased a T1 block to copy out (get)
  kT0ToClient = 2,  // a client was leased a T0 block to copy out on its GPU (get from T0)
  kClientToT0 = 3,  // a client filled a T0 slot it then committed or published (put, work_publish)
};
inline constexpr int kNumCopyDirections = 4;

// What happened to working slots (protocol v3), for kvtier_working_slot_ops_total{op}.
enum class WorkOp : uint8_t { kTake = 0, kPublish = 1, kFree = 2, kOverQuota = 3 };
inline constexpr int kNumWorkOps = 4;

// The latency buckets of kvtier_transfer_seconds: 10 µs to 10 s, about 3 per decade — a T1 hit is
// tens of µs, an NVMe promotion of a 2 MiB block ~1 ms, a long get under load up to seconds.
std::vector<double> TransferSecondsBuckets();

// Every family name DaemonMetrics exports (for tests and docs/metrics.md).
std::vector<std::string> MetricFamilyNames();

class DaemonMetrics {
 public:
  // Builds the registry and, unless `listen_address` is empty, serves it at
  // http://<listen_address>/metrics ("host:port"; port 0 picks a free port, see listening_port()).
  // `tiers`: the tiers the daemon runs (T1 always); the tier-move latency series exist for moves
  // between those only. Errors: InvalidArgument for an address that is not host:port, Unavailable
  // when the address cannot be bound (in use, not a local address); both name the address.
  // `http`: threads > 0 and request_timeout_ms > 0, else InvalidArgument.
  // `pools`: a daemon of several memory pools names them here; the request-path series are then
  // one set per pool, labelled {pool="<name>"}, recorded through ForPool(i) (this object's own
  // recording calls must not be used then). Empty: one set, no pool label.
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> Create(
      const std::string& listen_address, TierMask tiers = TierBit(Tier::kT1),
      const MetricsHttpOptions& http = {}, const std::vector<std::string>& pools = {});
  // Stops the HTTP server (waiting for a scrape in progress) before anything it reads goes away.
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // The bound TCP port; 0 when there is no endpoint.
  int listening_port() const { return port_; }

  // Where pool `pool` (an index into Create's `pools`) records its requests: an object of this
  // class whose recording calls below update that pool's series; valid while this one lives. This
  // object itself when Create had no pools. Precondition: pool < pools.size() (or 0).
  DaemonMetrics* ForPool(size_t pool);

  // Reads tier and manager counters from `manager` at every scrape from now on; null stops it.
  // Returns after any scrape reading the previous manager has finished.
  // `remote`: the manager's remote tier (T3), whose store's counters the page shows too.
  void WatchTiers(const TierManager* manager, const RemoteTier* remote = nullptr);
  // WatchTiers for a daemon of several pools: each pool's tier families carry {pool="<name>"}
  // (docs/metrics.md); an empty list stops reading tiers.
  void WatchPools(std::vector<WatchedPool> pools);

  // --- Recording, for the op layer. Cheap: atomics, no allocation, no lookups. ---
  // One lookup of `keys` block keys; hit_blocks[t] of the found prefix were served from tier t
  // (the tier the answer named). The rest (keys - sum) are misses. Tokens = blocks * block_tokens.
  void OnLookup(uint64_t keys, const std::array<uint64_t, kNumTiers>& hit_blocks,
                uint32_t block_tokens);
  void ObserveTransfer(TransferOp op, double seconds);
  // One finished move between tiers (a TierManagerOptions::on_move report); a move between tiers
  // not given to Create is ignored.
  void ObserveTierMove(const TierMove& move, double seconds);
  void AddCopiedBytes(CopyDirection direction, uint64_t bytes);
  void SetConnectedClients(uint64_t clients);
  // +1 when a client connects, -1 when it goes: what services of several pools report, each
  // knowing only its own sessions.
  void AddConnectedClients(int64_t delta);
  void AddLeases(int64_t delta);  // + when leases are granted, - when released or dropped
  // `count` working slots taken, published, freed (each also changes kvtier_working_slots) or
  // refused over quota.
  void OnWorkingSlots(WorkOp op, uint64_t count);

  // The page Prometheus would get, without HTTP (tests, `kvtier stat`); empty from a ForPool
  // object, whose Watch* calls do nothing either.
  std::string Render() const;

 private:
  using Labels = std::map<std::string, std::string>;
  // The page's own object; with `pools`, no request-path series of its own (ForPool's have them).
  DaemonMetrics(TierMask tiers, const std::vector<std::string>& pools);
  // One pool's request-path series, in `registry`'s families, each with `base` labels.
  DaemonMetrics(TierMask tiers, std::shared_ptr<prometheus::Registry> registry, const Labels& base);
  void RegisterLookupMetrics(prometheus::Registry& r, const Labels& base);
  void RegisterTransferMetrics(prometheus::Registry& r, TierMask tiers, const Labels& base);
  absl::Status Serve(const std::string& listen_address, const MetricsHttpOptions& http);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<internal::MetricsCollector> collector_;  // registry_ + tier snapshots
  std::vector<std::unique_ptr<DaemonMetrics>> pools_;      // ForPool's; empty without pools
  std::unique_ptr<prometheus::Exposer> exposer_;           // last member built, first destroyed
  int port_ = 0;

  // Objects inside registry_'s families; stable for the registry's lifetime.
  prometheus::Counter* lookups_ = nullptr;
  prometheus::Counter* lookup_hit_blocks_ = nullptr;
  prometheus::Counter* lookup_miss_blocks_ = nullptr;
  prometheus::Counter* miss_tokens_ = nullptr;
  std::array<prometheus::Counter*, kNumTiers> hit_blocks_{};
  std::array<prometheus::Counter*, kNumTiers> hit_tokens_{};
  std::array<prometheus::Counter*, kNumCopyDirections> copied_bytes_{};
  std::array<prometheus::Histogram*, kNumTransferOps> transfer_seconds_{};
  std::array<prometheus::Histogram*, kNumTierMoves> move_seconds_{};  // null: tier not present
  prometheus::Gauge* connected_clients_ = nullptr;
  prometheus::Gauge* leases_held_ = nullptr;
  prometheus::Gauge* working_slots_ = nullptr;
  std::array<prometheus::Counter*, kNumWorkOps> work_ops_{};
};

}  // namespace kvtier
