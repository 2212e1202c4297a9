#include "daemon/daemon.h"

#include <signal.h>

#include <boost/asio.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/key_scope.h"
#include "daemon/log_file.h"
#include "daemon/lookup_recorder.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "daemon/service.h"
#include "tiers/remote/remote_tier.h"
#include "tiers/tier_manager.h"

namespace kvtier {

namespace {

// daemon.flush_on_stop: T1's blocks with no T2 copy are written to T2 before the tiers close, so a
// clean restart finds them, until `deadline` (one for every pool: daemon.flush_on_stop_seconds
// bounds the whole stop); logs what it did and what it could not. `pool`: "" for the single pool,
// else " of pool 'name'" for the log.
void FlushT1OnStop(TierManager& tiers, const DaemonSettings& settings, const std::string& pool,
                   std::chrono::steady_clock::time_point deadline) {
  if (!settings.flush_on_stop || tiers.t2() == nullptr) return;
  const auto start = std::chrono::steady_clock::now();
  const TierManagerStats before = tiers.Stats();
  KVTIER_LOG(kInfo, "daemon", "flushing T1{} to T2 (daemon.flush_on_stop, at most {} s)", pool,
             settings.flush_on_stop_seconds);
  const bool finished = tiers.FlushT1(deadline);
  const TierManagerStats after = tiers.Stats();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  const std::string summary = fmt::format(
      "{} blocks written to T2, {} not (refused by T2's admission or failed), {} left in T1 "
      "(leased{}), in {:.3f} s",
      after.tier(Tier::kT1).moved_down - before.tier(Tier::kT1).moved_down,
      (after.tier(Tier::kT1).rejected - before.tier(Tier::kT1).rejected) +
          (after.tier(Tier::kT1).move_down_failures - before.tier(Tier::kT1).move_down_failures),
      tiers.t1().Stats().used_slots, finished ? "" : ", or daemon.flush_on_stop_seconds ran out",
      took.count());
  if (finished) {
    KVTIER_LOG(kInfo, "daemon", "flushed T1{}: {}", pool, summary);
  } else {
    KVTIER_LOG(kWarn, "daemon", "flush of T1{} cut short: {}", pool, summary);
  }
}

void RemoveCreated(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    KVTIER_LOG(kInfo, "daemon", "start failed: removed {}, created by it{}", path,
               ec ? fmt::format(" (failed: {})", ec.message()) : "");
  }
}

}  // namespace

// One memory pool's tiers (config.h PoolPlan).
struct PoolTiers {
  std::string name;
  bool named = false;  // one of several pools: its name labels its metrics and log lines
  std::unique_ptr<TierManager> tiers;
  RemoteTier* remote = nullptr;  // T3, owned by the tier manager's options; null without
  std::string ForLog() const { return named ? fmt::format(" of pool '{}'", name) : ""; }
};

// Members in construction order; destroyed in reverse (see daemon.h).
class Daemon::Parts {
 public:
  explicit Parts(const DaemonConfig& c) : config(c) {}
  ~Parts() {
    if (server) server->Stop();
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::seconds(config.daemon.flush_on_stop_seconds);
    for (PoolTiers& pool : pools) {
      // No server: the start failed, and nothing was served.
      if (server) FlushT1OnStop(*pool.tiers, config.daemon, pool.ForLog(), deadline);
    }
    if (metrics) metrics->WatchPools({});
  }
  const DaemonConfig config;
  // Before the tiers, which report their moves to it until they are destroyed.
  std::unique_ptr<DaemonMetrics> metrics;
  std::vector<PoolTiers> pools;  // in config order; every one has its tier manager
  std::unique_ptr<KeyScope> scope;
  std::unique_ptr<LookupRecorder> recorder;
  std::vector<std::unique_ptr<Service>> services;  // services[i] serves pools[i]
  std::unique_ptr<Server> server;
};

namespace {

ServerOptions ServerOptionsOf(const DaemonConfig& config) {
  ServerOptions o;
  o.socket_path = config.SocketPath();
  o.socket_mode = config.daemon.socket_mode;
  o.default_pool = config.pool.name;
  o.allowed_uids = config.daemon.allowed_uids;
  o.allowed_gids = config.daemon.allowed_gids;
  o.max_connections = config.daemon.max_connections;
  o.max_ring_entries = config.daemon.max_ring_entries;
  o.max_arena_bytes = config.daemon.max_arena_bytes;
  // Both fit an int: the config is validated (daemon.h), spin_us <= 1000000, spin_threads <= 4096.
  o.connection.spin_us = static_cast<int>(config.daemon.spin_us);
  const uint32_t slots = config.daemon.spin_threads;
  o.connection.spin_budget = std::make_shared<SpinBudget>(
      slots == 0 ? DefaultSpinSlots() : static_cast<int>(slots), UsableCpus());
  return o;
}

// The metrics endpoint, when enabled: the move-latency series of every tier a pool runs.
absl::Status BuildMetrics(Daemon::Parts& p, const std::vector<PoolPlan>& plans) {
  if (!p.config.metrics.enabled) return absl::OkStatus();
  TierMask tiers = TierBit(Tier::kT1);
  for (const PoolPlan& plan : plans) {
    if (plan.tiers.t0) tiers |= TierBit(Tier::kT0);
    if (plan.tiers.t2) tiers |= TierBit(Tier::kT2);
    if (plan.remote) tiers |= TierBit(Tier::kT3);
  }
  const MetricsHttpOptions http{p.config.metrics.threads, p.config.metrics.request_timeout_ms};
  std::vector<std::string> pools;  // labels of the request-path series; none for one [pool]
  for (const PoolPlan& plan : plans) {
    if (plan.pool_scoped_keys) pools.push_back(plan.name);
  }
  KVTIER_ASSIGN_OR_RETURN(
      p.metrics, DaemonMetrics::Create(p.config.metrics.listen_address, tiers, http, pools));
  return absl::OkStatus();
}

// What a pool of several gets, for the log (config.h PoolPlan).
void LogPool(const PoolPlan& plan) {
  const TierManagerOptions& o = plan.tiers;
  KVTIER_LOG(
      kInfo, "daemon", "pool '{}': T1 {} bytes (memfd {}), T0 {}, T2 {}; uids [{}], gids [{}]",
      plan.name, o.t1.capacity_bytes, o.t1.segment_name,
      !o.t0                       ? std::string("off")
      : o.t0->capacity_bytes != 0 ? fmt::format("{} bytes", o.t0->capacity_bytes)
                                  : fmt::format("{:.3f} of the free memory", o.t0->free_fraction),
      o.t2 ? fmt::format("{} bytes in {}", o.t2->capacity_bytes, fmt::join(o.t2->directories, ", "))
           : "off",
      fmt::join(plan.uids, ", "), fmt::join(plan.gids, ", "));
}

// One pool's tier manager (and its T3), reporting its moves to the metrics.
absl::Status BuildPool(Daemon::Parts& p, const PoolPlan& plan) {
  PoolTiers pool{plan.name, plan.pool_scoped_keys, nullptr, nullptr};
  TierManagerOptions options = plan.tiers;
  if (pool.named) LogPool(plan);
  if (plan.remote) {
    KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<RemoteTier> t3, RemoteTier::Open(*plan.remote));
    pool.remote = t3.get();
    options.t3 = std::move(t3);
    const RemoteStoreOptions& store = plan.remote->store;
    KVTIER_LOG(kInfo, "daemon", "remote tier T3{} on {} ({}), key prefix \"{}\"", pool.ForLog(),
               fmt::join(store.nodes, ", "),
               store.cluster == ClusterMode::kCluster      ? "cluster"
               : store.cluster == ClusterMode::kStandalone ? "standalone"
                                                           : "cluster or not",
               store.key_prefix);
  }
  if (p.metrics) {
    // Outlives the tiers (Parts' member order); this pool's series (p.pools.size() is its index).
    DaemonMetrics* metrics = p.metrics->ForPool(p.pools.size());
    options.on_move = [metrics](const TierMove& move, double seconds) {
      metrics->ObserveTierMove(move, seconds);
    };
  }
  absl::StatusOr<std::unique_ptr<TierManager>> tiers = TierManager::Create(options);
  if (!tiers.ok() && plan.pool_scoped_keys) {
    return absl::Status(tiers.status().code(), fmt::format("pool '{}': {}", plan.name,
                                                           std::string(tiers.status().message())));
  }
  KVTIER_RETURN_IF_ERROR(tiers.status());
  pool.tiers = std::move(*tiers);
  p.pools.push_back(std::move(pool));
  return absl::OkStatus();
}

absl::Status BuildMetricsAndTiers(Daemon::Parts& p) {
  const std::vector<PoolPlan> plans = p.config.PoolPlans();
  KVTIER_RETURN_IF_ERROR(BuildMetrics(p, plans));
  for (const PoolPlan& plan : plans) KVTIER_RETURN_IF_ERROR(BuildPool(p, plan));
  if (p.metrics) {
    std::vector<WatchedPool> watched;
    for (const PoolTiers& pool : p.pools) {
      watched.push_back({pool.named ? pool.name : "", pool.tiers.get(), pool.remote});
    }
    p.metrics->WatchPools(std::move(watched));
  }
  return absl::OkStatus();
}

// A service per pool, and the server over them.
absl::Status BuildServices(Daemon::Parts& p) {
  ServiceOptions service_options;
  service_options.verify_puts = p.config.daemon.verify_puts;
  service_options.verify_threads = p.config.daemon.verify_threads;
  service_options.max_working_slots = p.config.daemon.max_working_slots;
  for (size_t i = 0; i < p.pools.size(); ++i) {
    const PoolTiers& pool = p.pools[i];
    service_options.pool_scope = pool.named ? pool.name : "";
    DaemonMetrics* metrics = p.metrics ? p.metrics->ForPool(i) : nullptr;
    p.services.push_back(std::make_unique<Service>(*pool.tiers, *p.scope, p.recorder.get(), metrics,
                                                   service_options));
  }
  const ServerOptions options = ServerOptionsOf(p.config);
  if (p.config.pools.empty()) {
    KVTIER_ASSIGN_OR_RETURN(p.server, Server::Start(options, *p.services[0]));
    return absl::OkStatus();
  }
  const std::vector<PoolPlan> plans = p.config.PoolPlans();
  std::vector<ServerPool> pools;
  for (size_t i = 0; i < plans.size(); ++i) {
    pools.push_back({{plans[i].name, plans[i].uids, plans[i].gids}, p.services[i].get()});
  }
  KVTIER_ASSIGN_OR_RETURN(p.server, Server::Start(options, std::move(pools)));
  return absl::OkStatus();
}

// "T1 100 of 512 slots usable" for one pool (T1 grows after start: HostTier), with its name.
std::string ReadyT1(const PoolTiers& pool) {
  const HostTier& t1 = pool.tiers->t1();
  return fmt::format(
      "T1{} {} of {} slots usable{}", pool.named ? " '" + pool.name + "'" : "", t1.ready_slots(),
      t1.capacity_slots(),
      t1.ready_slots() < t1.capacity_slots() ? ", the rest grows in the background" : "");
}

absl::Status Build(Daemon::Parts& p) {
  const auto start = std::chrono::steady_clock::now();
  KVTIER_RETURN_IF_ERROR(BuildMetricsAndTiers(p));
  absl::StatusOr<KeyScope> scope =
      KeyScope::Load(p.config.KeyScopePath(), p.config.KeyScopeShared());
  if (!scope.ok() && p.config.KeyScopeShared()) {
    return absl::Status(scope.status().code(), fmt::format("daemon.key_scope_file: {}",
                                                           std::string(scope.status().message())));
  }
  KVTIER_RETURN_IF_ERROR(scope.status());
  p.scope = std::make_unique<KeyScope>(*scope);
  if (!p.config.daemon.record_file.empty()) {
    KVTIER_ASSIGN_OR_RETURN(p.recorder, LookupRecorder::Open(p.config.daemon.record_file));
  }
  KVTIER_RETURN_IF_ERROR(BuildServices(p));
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  // T1 grows after this (HostTier): say how much of it serves now, so the figure is not misread.
  std::vector<std::string> t1;
  for (const PoolTiers& pool : p.pools) t1.push_back(ReadyT1(pool));
  KVTIER_LOG(kInfo, "daemon", "kvtierd ready in {:.3f} s: socket {}, metrics {}; {}", took.count(),
             p.config.SocketPath(),
             p.metrics ? fmt::format("http://{}/metrics", p.config.metrics.listen_address) : "off",
             fmt::join(t1, "; "));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonConfig& config) {
  // Debian's abseil is built with deadlock detection on; it costs on every lock and finds nothing
  // the tests under ThreadSanitizer would not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ::signal(SIGPIPE, SIG_IGN);  // a client gone mid-send is an error value, not a signal
  auto parts = std::make_unique<Parts>(config);
  if (absl::Status status = Build(*parts); !status.ok()) {
    // No client was served, so T2 files this start created hold nothing: they go with it, so that
    // the next start (perhaps with another t2.capacity_bytes) finds the directories as they were.
    std::vector<std::string> created;
    for (const PoolTiers& pool : parts->pools) {
      if (pool.tiers->t2() == nullptr) continue;
      const std::vector<std::string> paths = pool.tiers->t2()->created_paths();
      created.insert(created.end(), paths.begin(), paths.end());
    }
    parts.reset();
    RemoveCreated(created);
    return status;
  }
  return std::unique_ptr<Daemon>(new Daemon(std::move(parts)));
}

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Daemon::~Daemon() {
  KVTIER_LOG(kInfo, "daemon", "stopping: closing clients, then flushing T2");
  parts_.reset();
  KVTIER_LOG(kInfo, "daemon", "stopped");
}

void Daemon::RunUntilSignalled() {
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        if (signo != SIGHUP) {
          KVTIER_LOG(kInfo, "daemon", "signal {}: stopping", signo == SIGTERM ? "TERM" : "INT");
          return;  // io.run() returns: nothing else is waiting
        }
        if (!parts_->config.daemon.log_file.empty()) {
          (void)RedirectStderrTo(parts_->config.daemon.log_file);
        }
        if (parts_->recorder) (void)parts_->recorder->Reopen();
        KVTIER_LOG(kInfo, "daemon", "SIGHUP: log and record files reopened");
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  io.run();
}

}  // namespace kvtier
