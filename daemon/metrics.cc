#include "daemon/metrics.h"

#include <CivetServer.h>
#include <fmt/format.h>

#include <exception>
#include <map>
#include <numeric>
#include <sstream>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "daemon/metrics_tiers.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "tiers/tier_manager_options.h"

#ifndef KVTIER_VERSION
#define KVTIER_VERSION "unknown"
#endif

namespace kvtier {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

constexpr std::array<const char*, kNumTransferOps> kTransferOpNames = {"get", "put"};

// The moves of kNumTierMoves, with their labels. `direction` names them as the moved-bytes
// directions do (kvtier_moved_bytes_total), so bytes and latency of one direction line up.
struct TierMoveSeries {
  MoveKind kind;
  Tier from, to;
  const char* op;
  const char* direction;
};
constexpr std::array<TierMoveSeries, kNumTierMoves> kTierMoveSeries = {{
    {MoveKind::kPromotion, Tier::kT2, Tier::kT1, "promote", "t2_to_t1"},
    {MoveKind::kPromotion, Tier::kT0, Tier::kT1, "promote", "t0_to_t1"},
    {MoveKind::kPromotion, Tier::kT1, Tier::kT0, "promote", "t1_to_t0"},
    {MoveKind::kDemotion, Tier::kT1, Tier::kT2, "demote", "t1_to_t2"},
    {MoveKind::kDemotion, Tier::kT0, Tier::kT1, "demote", "t0_to_t1"},
    {MoveKind::kPromotion, Tier::kT3, Tier::kT1, "promote", "t3_to_t1"},
    {MoveKind::kDemotion, Tier::kT2, Tier::kT3, "demote", "t2_to_t3"},
    {MoveKind::kDemotion, Tier::kT1, Tier::kT3, "demote", "t1_to_t3"},
}};
constexpr std::array<const char*, kNumCopyDirections> kCopyDirectionNames = {
    "client_to_t1", "t1_to_client", "t0_to_client", "client_to_t0"};

Family<Counter>& CounterFamily(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}
Family<Gauge>& GaugeFamily(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

// `base` and `more` in one label set.
std::map<std::string, std::string> With(std::map<std::string, std::string> base,
                                        const std::map<std::string, std::string>& more) {
  base.insert(more.begin(), more.end());
  return base;
}

// "host:port" with a numeric port; civetweb parses the rest and bind() judges the host.
absl::Status CheckAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535 ||
      address.find_first_of(" ,") != std::string::npos) {
    return absl::InvalidArgumentError(fmt::format(
        "metrics address '{}' is not host:port (for example {})", address, kDefaultMetricsAddress));
  }
  return absl::OkStatus();
}

// civetweb reports why it could not start (e.g. "cannot bind to 127.0.0.1:9464: 98 (Address already
// in use)") only through its log callback, which has no user pointer; mg_start runs the callback on
// the thread constructing the exposer, so that thread points this at where the reason goes.
thread_local std::string* startup_log = nullptr;

int OnCivetwebLog(const mg_connection* /*connection*/, const char* message) {
  if (startup_log != nullptr) {
    if (!startup_log->empty()) startup_log->append("; ");
    startup_log->append(message);
  } else {
    KVTIER_LOG(kWarn, "metrics", "http server: {}", message);
  }
  return 1;  // handled: civetweb writes nothing to stderr itself
}

// civetweb's options (civetweb 1.15 names). request_timeout_ms bounds how long a connection that
// sends nothing, or sends its request slowly, holds a thread (civetweb's default: 30 s); keep-alive
// stays off (its default), so an answered connection is closed and holds nothing.
std::vector<std::string> CivetwebOptions(const std::string& listen_address,
                                         const MetricsHttpOptions& http) {
  return {"listening_ports",    listen_address,
          "num_threads",        std::to_string(http.threads),
          "request_timeout_ms", std::to_string(http.request_timeout_ms),
          "enable_keep_alive",  "no"};
}

}  // namespace

std::vector<double> TransferSecondsBuckets() {
  return {10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3,
          10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0,  2.5,    10.0};
}

std::vector<std::string> MetricFamilyNames() {
  return {// Recorded by the op layer.
          "kvtier_build_info", "kvtier_lookups_total", "kvtier_lookup_blocks_total",
          "kvtier_hit_blocks_total", "kvtier_hit_tokens_total", "kvtier_miss_tokens_total",
          "kvtier_moved_bytes_total", "kvtier_transfer_seconds", "kvtier_connected_clients",
          "kvtier_leases_held", "kvtier_working_slots", "kvtier_working_slot_ops_total",
          // Read from the tier manager at scrape time.
          "kvtier_tier_capacity_bytes", "kvtier_tier_used_bytes", "kvtier_tier_admitting",
          "kvtier_tier_io_errors_total", "kvtier_evictions_total", "kvtier_clean_evictions_total",
          "kvtier_dropped_blocks_total", "kvtier_admissions_rejected_total",
          "kvtier_checksum_failures_total", "kvtier_put_blocks_total", "kvtier_get_blocks_total",
          "kvtier_promotion_failures_total", "kvtier_demotions_total", "kvtier_demotions_in_flight",
          "kvtier_recovered_blocks", "kvtier_tier_ready_fraction"};
}

DaemonMetrics::DaemonMetrics(TierMask tiers, const std::vector<std::string>& pools)
    : registry_(std::make_shared<prometheus::Registry>()),
      collector_(std::make_shared<internal::MetricsCollector>(registry_)) {
  GaugeFamily(*registry_, "kvtier_build_info", "Always 1; labels say which kvtier this is.")
      .Add({{"version", KVTIER_VERSION}})
      .Set(1);
  if (pools.empty()) {
    RegisterLookupMetrics(*registry_, {});
    RegisterTransferMetrics(*registry_, tiers, {});
  }
  for (const std::string& pool : pools) {
    pools_.push_back(std::unique_ptr<DaemonMetrics>(
        new DaemonMetrics(tiers, registry_, Labels{{"pool", pool}})));
  }
}

DaemonMetrics::DaemonMetrics(TierMask tiers, std::shared_ptr<prometheus::Registry> registry,
                             const Labels& base)
    : registry_(std::move(registry)) {
  RegisterLookupMetrics(*registry_, base);
  RegisterTransferMetrics(*registry_, tiers, base);
}

DaemonMetrics* DaemonMetrics::ForPool(size_t pool) {
  return pools_.empty() ? this : pools_.at(pool).get();
}

void DaemonMetrics::RegisterLookupMetrics(prometheus::Registry& r, const Labels& base) {
  lookups_ = &CounterFamily(r, "kvtier_lookups_total", "Lookup requests.").Add(base);
  auto& blocks = CounterFamily(r, "kvtier_lookup_blocks_total",
                               "Block keys looked up, by result (hit: in the found prefix).");
  lookup_hit_blocks_ = &blocks.Add(With(base, {{"result", "hit"}}));
  lookup_miss_blocks_ = &blocks.Add(With(base, {{"result", "miss"}}));
  auto& hit_blocks = CounterFamily(r, "kvtier_hit_blocks_total",
                                   "Blocks lookups found, by the tier the answer named.");
  auto& hit_tokens =
      CounterFamily(r, "kvtier_hit_tokens_total", "Tokens of the blocks lookups found, by tier.");
  for (size_t t = 0; t < kNumTiers; ++t) {
    const std::string tier(TierName(static_cast<Tier>(t)));
    hit_blocks_[t] = &hit_blocks.Add(With(base, {{"tier", tier}}));
    hit_tokens_[t] = &hit_tokens.Add(With(base, {{"tier", tier}}));
  }
  miss_tokens_ = &CounterFamily(r, "kvtier_miss_tokens_total",
                                "Tokens of looked-up blocks not found (prefill to compute).")
                      .Add(base);
}

void DaemonMetrics::RegisterTransferMetrics(prometheus::Registry& r, TierMask tiers,
                                            const Labels& base) {
  auto& moved = CounterFamily(r, "kvtier_moved_bytes_total",
                              "Payload bytes moved between tiers and clients, by direction.");
  for (size_t d = 0; d < kNumCopyDirections; ++d) {
    copied_bytes_[d] = &moved.Add(With(base, {{"direction", kCopyDirectionNames[d]}}));
  }
  auto& seconds =
      prometheus::BuildHistogram()
          .Name("kvtier_transfer_seconds")
          .Help(
              "Latency of requests (op get, put) and of one block's move between tiers (op "
              "promote, demote; by direction).")
          .Register(r);
  for (size_t op = 0; op < kNumTransferOps; ++op) {
    transfer_seconds_[op] =
        &seconds.Add(With(base, {{"op", kTransferOpNames[op]}}), TransferSecondsBuckets());
  }
  for (size_t i = 0; i < kNumTierMoves; ++i) {
    const TierMoveSeries& m = kTierMoveSeries[i];
    if ((tiers & TierBit(m.from)) == 0 || (tiers & TierBit(m.to)) == 0) continue;
    move_seconds_[i] = &seconds.Add(With(base, {{"op", m.op}, {"direction", m.direction}}),
                                    TransferSecondsBuckets());
  }
  connected_clients_ =
      &GaugeFamily(r, "kvtier_connected_clients", "Clients connected now.").Add(base);
  leases_held_ =
      &GaugeFamily(r, "kvtier_leases_held", "Block leases held by clients now.").Add(base);
  working_slots_ = &GaugeFamily(r, "kvtier_working_slots",
                                "Unkeyed working slots (T0 and T1) held by clients now.")
                        .Add(base);
  auto& ops = CounterFamily(r, "kvtier_working_slot_ops_total",
                            "Working slots taken, published (became cached blocks), freed "
                            "unpublished, and refused because the client held its quota "
                            "(daemon.max_working_slots).");
  constexpr std::array<const char*, kNumWorkOps> kWorkOpNames = {"take", "publish", "free",
                                                                 "over_quota"};
  for (size_t op = 0; op < kNumWorkOps; ++op) {
    work_ops_[op] = &ops.Add(With(base, {{"op", kWorkOpNames[op]}}));
  }
}

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Create(
    const std::string& listen_address, TierMask tiers, const MetricsHttpOptions& http,
    const std::vector<std::string>& pools) {
  std::unique_ptr<DaemonMetrics> metrics(new DaemonMetrics(tiers | TierBit(Tier::kT1), pools));
  if (!listen_address.empty()) KVTIER_RETURN_IF_ERROR(metrics->Serve(listen_address, http));
  return metrics;
}

absl::Status DaemonMetrics::Serve(const std::string& listen_address,
                                  const MetricsHttpOptions& http) {
  KVTIER_RETURN_IF_ERROR(CheckAddress(listen_address));
  if (http.threads == 0 || http.request_timeout_ms == 0) {
    return absl::InvalidArgumentError(
        fmt::format("metrics endpoint: threads ({}) and request_timeout_ms ({}) must be > 0",
                    http.threads, http.request_timeout_ms));
  }
  CivetCallbacks callbacks;
  callbacks.log_message = &OnCivetwebLog;
  std::string reason;
  startup_log = &reason;
  try {
    exposer_ =
        std::make_unique<prometheus::Exposer>(CivetwebOptions(listen_address, http), &callbacks);
  } catch (const std::exception& e) {
    if (reason.empty()) reason = e.what();
  }
  startup_log = nullptr;
  if (exposer_ == nullptr) {
    return absl::UnavailableError(
        fmt::format("metrics endpoint cannot listen on '{}': {}", listen_address, reason));
  }
  exposer_->RegisterCollectable(collector_);
  const std::vector<int> ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? 0 : ports.front();
  KVTIER_LOG(kInfo, "metrics", "serving http://{}:{}/metrics",
             listen_address.substr(0, listen_address.rfind(':')), port_);
  return absl::OkStatus();
}

DaemonMetrics::~DaemonMetrics() {
  exposer_.reset();  // civetweb stops and joins its threads; no scrape runs after this
}

void DaemonMetrics::WatchPools(std::vector<WatchedPool> pools) {
  if (collector_ != nullptr) collector_->Watch(std::move(pools));  // null: a ForPool object
}

void DaemonMetrics::WatchTiers(const TierManager* manager, const RemoteTier* remote) {
  if (collector_ == nullptr) return;
  if (manager == nullptr) return collector_->Watch({});
  collector_->Watch({WatchedPool{"", manager, remote}});
}

void DaemonMetrics::OnLookup(uint64_t keys, const std::array<uint64_t, kNumTiers>& hit_blocks,
                             uint32_t block_tokens) {
  const uint64_t hits = std::accumulate(hit_blocks.begin(), hit_blocks.end(), uint64_t{0});
  const uint64_t misses = keys > hits ? keys - hits : 0;
  lookups_->Increment();
  lookup_hit_blocks_->Increment(static_cast<double>(hits));
  lookup_miss_blocks_->Increment(static_cast<double>(misses));
  miss_tokens_->Increment(static_cast<double>(misses) * block_tokens);
  for (size_t t = 0; t < kNumTiers; ++t) {
    if (hit_blocks[t] == 0) continue;
    hit_blocks_[t]->Increment(static_cast<double>(hit_blocks[t]));
    hit_tokens_[t]->Increment(static_cast<double>(hit_blocks[t]) * block_tokens);
  }
}

void DaemonMetrics::ObserveTransfer(TransferOp op, double seconds) {
  transfer_seconds_[static_cast<size_t>(op)]->Observe(seconds);
}

void DaemonMetrics::ObserveTierMove(const TierMove& move, double seconds) {
  for (size_t i = 0; i < kNumTierMoves; ++i) {
    const TierMoveSeries& m = kTierMoveSeries[i];
    if (m.kind != move.kind || m.from != move.from || m.to != move.to) continue;
    if (move_seconds_[i] != nullptr) move_seconds_[i]->Observe(seconds);
    return;
  }
}

void DaemonMetrics::AddCopiedBytes(CopyDirection direction, uint64_t bytes) {
  copied_bytes_[static_cast<size_t>(direction)]->Increment(static_cast<double>(bytes));
}

void DaemonMetrics::AddConnectedClients(int64_t delta) {
  connected_clients_->Increment(static_cast<double>(delta));
}

void DaemonMetrics::SetConnectedClients(uint64_t clients) {
  connected_clients_->Set(static_cast<double>(clients));
}

void DaemonMetrics::AddLeases(int64_t delta) {
  leases_held_->Increment(static_cast<double>(delta));
}

void DaemonMetrics::OnWorkingSlots(WorkOp op, uint64_t count) {
  const auto n = static_cast<double>(count);
  work_ops_[static_cast<size_t>(op)]->Increment(n);
  if (op == WorkOp::kTake) working_slots_->Increment(n);
  if (op == WorkOp::kPublish || op == WorkOp::kFree) working_slots_->Decrement(n);
}

std::string DaemonMetrics::Render() const {
  std::ostringstream out;
  if (collector_ != nullptr) prometheus::TextSerializer().Serialize(out, collector_->Collect());
  return out.str();
}

}  // namespace kvtier
