// The scrape-time half of DaemonMetrics (daemon/metrics.h): Prometheus families built from a
// snapshot of the tier manager's and the tiers' own counters, and the collector that joins them to
// the op layer's registry into one page. Internal to daemon/; docs/metrics.md lists the families.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/metrics.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "tiers/remote/remote_tier.h"
#include "tiers/storage_tier.h"
#include "tiers/tier_manager.h"

namespace kvtier::internal {

// One consistent-enough read of everything the manager and its tiers count. Each part is its own
// snapshot (counters move between the reads); every value is monotonic or a current level, so a
// scrape that straddles an update is still correct the next time.
struct TierSnapshot {
  TierManagerStats manager;
  TierStats t1;
  bool has_t0 = false;
  TierStats t0;  // valid when has_t0
  bool has_t2 = false;
  TierStats t2;
  bool has_t3 = false;
  TierStats t3;             // valid when has_t3
  RemoteStoreStats remote;  // valid when has_t3 and the remote tier was given
  bool has_remote = false;
};
// `remote` (may be null): the manager's T3, for its store's own counters.
TierSnapshot TakeTierSnapshot(const TierManager& manager, const RemoteTier* remote = nullptr);

// The remote tier's store families (metrics_remote.cc).
std::vector<prometheus::MetricFamily> RemoteFamilies(const RemoteStoreStats& stats);

// A family with no samples yet; one sample with `labels` and `value` (a counter's or gauge's, by
// the family's type). For the families built at scrape time (here and metrics_remote.cc).
prometheus::MetricFamily NewFamily(std::string name, std::string help, prometheus::MetricType type);
void AddSample(prometheus::MetricFamily& family,
               std::vector<prometheus::ClientMetric::Label> labels, double value);

// The families a snapshot exports (names, types and labels as in docs/metrics.md).
std::vector<prometheus::MetricFamily> TierFamilies(const TierSnapshot& snapshot);

// Appends `more` to `into`; a family whose name is already in `into` gets its samples added to
// that family, so each name appears once on the page (Prometheus rejects a repeated TYPE line).
void MergeFamilies(std::vector<prometheus::MetricFamily>& into,
                   std::vector<prometheus::MetricFamily> more);

// `label` put first on every sample of `families` (a pool's name: {pool="a",tier="t1"}).
void AddLabel(std::vector<prometheus::MetricFamily>& families,
              const prometheus::ClientMetric::Label& label);

// What the exposer serves: the registry's families plus, for each watched pool, its tier
// manager's snapshot's (with a `pool` label when the pool has a name: a daemon of several pools).
// Thread-safe; Collect runs on the exposer's threads.
class MetricsCollector : public prometheus::Collectable {
 public:
  explicit MetricsCollector(std::shared_ptr<prometheus::Registry> registry);

  // Replaces the watched pools (empty: stops reading tiers). Waits for a Collect reading the
  // previous ones to finish.
  void Watch(std::vector<WatchedPool> pools);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;
  std::vector<WatchedPool> pools_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier::internal
