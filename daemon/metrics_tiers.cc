#include "daemon/metrics_tiers.h"

#include <algorithm>
#include <string>
#include <utility>

namespace kvtier::internal {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily NewFamily(std::string name, std::string help, MetricType type) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

// One sample with labels {name=value}; the value goes where the family's type reads it.
void AddSample(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family.metric.push_back(std::move(m));
}

namespace {

void AddTierSample(MetricFamily& family, Tier tier, double value) {
  AddSample(family, {{"tier", std::string(TierName(tier))}}, value);
}

// Families with one sample per present tier (T1 always, T0 and T2 when configured).
std::vector<MetricFamily> CapacityFamilies(const TierSnapshot& s) {
  MetricFamily capacity =
      NewFamily("kvtier_tier_capacity_bytes", "Bytes of slots the tier has (slots x slot size).",
                MetricType::Gauge);
  MetricFamily used = NewFamily(
      "kvtier_tier_used_bytes",
      "Bytes of the tier's slots in use (whole slots, not payload bytes).", MetricType::Gauge);
  MetricFamily admitting = NewFamily("kvtier_tier_admitting",
                                     "1 while the tier accepts new blocks, 0 while it refuses them "
                                     "(disk full, failed device).",
                                     MetricType::Gauge);
  MetricFamily io_errors =
      NewFamily("kvtier_tier_io_errors_total",
                "Reads and writes of the tier that failed with an I/O error.", MetricType::Counter);
  auto add = [&](Tier tier, const TierStats& t) {
    AddTierSample(capacity, tier, static_cast<double>(t.capacity_slots * t.slot_bytes));
    AddTierSample(used, tier, static_cast<double>(t.used_slots * t.slot_bytes));
    AddTierSample(admitting, tier, t.admitting ? 1 : 0);
    const std::string name(TierName(tier));
    AddSample(io_errors, {{"op", "read"}, {"tier", name}}, static_cast<double>(t.read_errors));
    AddSample(io_errors, {{"op", "write"}, {"tier", name}}, static_cast<double>(t.write_errors));
  };
  if (s.has_t0) add(Tier::kT0, s.t0);
  add(Tier::kT1, s.t1);
  if (s.has_t2) add(Tier::kT2, s.t2);
  if (s.has_t3) add(Tier::kT3, s.t3);
  // T1 alone grows after start (HostTier: faulted in and registered in the background).
  MetricFamily ready = NewFamily("kvtier_tier_ready_fraction",
                                 "Share of the tier's slots usable now; T1 grows to 1 after start.",
                                 MetricType::Gauge);
  AddTierSample(ready, Tier::kT1,
                s.t1.capacity_slots == 0 ? 1.0
                                         : static_cast<double>(s.t1.ready_slots) /
                                               static_cast<double>(s.t1.capacity_slots));
  return {std::move(capacity), std::move(used), std::move(admitting), std::move(io_errors),
          std::move(ready)};
}

// The tiers this daemon runs, fastest first.
std::vector<Tier> PresentTiers(const TierSnapshot& s) {
  std::vector<Tier> tiers;
  if (s.has_t0) tiers.push_back(Tier::kT0);
  tiers.push_back(Tier::kT1);
  if (s.has_t2) tiers.push_back(Tier::kT2);
  if (s.has_t3) tiers.push_back(Tier::kT3);
  return tiers;
}

// Where blocks went when they left a tier, and the integrity checks that dropped some.
std::vector<MetricFamily> EvictionFamilies(const TierSnapshot& s) {
  const TierManagerStats& m = s.manager;
  MetricFamily evictions =
      NewFamily("kvtier_evictions_total",
                "Blocks the tier's eviction policy chose to leave the tier.", MetricType::Counter);
  MetricFamily clean = NewFamily("kvtier_clean_evictions_total",
                                 "Evicted blocks that already had a copy in the tier below, so "
                                 "leaving cost no write.",
                                 MetricType::Counter);
  MetricFamily dropped = NewFamily("kvtier_dropped_blocks_total",
                                   "Evicted blocks that left the tier with no copy below (gone).",
                                   MetricType::Counter);
  MetricFamily rejected = NewFamily("kvtier_admissions_rejected_total",
                                    "Blocks offered to the tier (demotions) that its admission "
                                    "policy refused, or that came while it was not admitting.",
                                    MetricType::Counter);
  const std::vector<Tier> tiers = PresentTiers(s);
  for (size_t i = 0; i < tiers.size(); ++i) {
    const RungCounters& c = m.tier(tiers[i]);
    AddTierSample(evictions, tiers[i], static_cast<double>(c.evictions));
    AddTierSample(clean, tiers[i], static_cast<double>(c.clean_evictions));
    AddTierSample(dropped, tiers[i], static_cast<double>(c.dropped));
    // A victim's refusal is counted on its own tier; the metric names the tier that refused.
    if (i + 1 < tiers.size())
      AddTierSample(rejected, tiers[i + 1], static_cast<double>(c.rejected));
  }
  MetricFamily checksum = NewFamily("kvtier_checksum_failures_total",
                                    "Blocks dropped because their payload did not match its "
                                    "checksum (T1: changed after commit; T2: failed a read).",
                                    MetricType::Counter);
  AddTierSample(checksum, Tier::kT1, static_cast<double>(m.integrity_drops));
  if (s.has_t2) AddTierSample(checksum, Tier::kT2, static_cast<double>(s.t2.checksum_failures));
  if (s.has_t3) AddTierSample(checksum, Tier::kT3, static_cast<double>(s.t3.checksum_failures));
  return {std::move(evictions), std::move(clean), std::move(dropped), std::move(rejected),
          std::move(checksum)};
}

// Stores and loads, by outcome.
std::vector<MetricFamily> PutGetFamilies(const TierSnapshot& s) {
  const TierManagerStats& m = s.manager;
  MetricFamily puts = NewFamily("kvtier_put_blocks_total",
                                "Blocks offered for storing, by outcome (refused: no slot free in "
                                "T1, or T0 for a working slot).",
                                MetricType::Counter);
  AddSample(puts, {{"result", "stored"}}, static_cast<double>(m.puts_committed));
  AddSample(puts, {{"result", "already_present"}}, static_cast<double>(m.puts_already_present));
  AddSample(puts, {{"result", "refused"}}, static_cast<double>(m.puts_refused_full));
  MetricFamily gets =
      NewFamily("kvtier_get_blocks_total", "Blocks requested for loading, by how they were served.",
                MetricType::Counter);
  AddSample(gets, {{"result", "t1"}}, static_cast<double>(m.tier(Tier::kT1).hits));
  AddSample(gets, {{"result", "promoted"}}, static_cast<double>(m.tier(Tier::kT1).gets_promoted));
  AddSample(gets, {{"result", "missing"}}, static_cast<double>(m.gets_missing));
  if (s.has_t0) {
    AddSample(gets, {{"result", "t0"}}, static_cast<double>(m.tier(Tier::kT0).hits));
    AddSample(gets, {{"result", "promoted_t0"}},
              static_cast<double>(m.tier(Tier::kT0).gets_promoted));
  }
  MetricFamily promotion_failures =
      NewFamily("kvtier_promotion_failures_total",
                "Copies into the tier for a read that failed (read error, checksum, no room).",
                MetricType::Counter);
  for (Tier t : PresentTiers(s)) {
    if (t == Tier::kT2 || t == Tier::kT3) continue;  // never read into
    AddSample(promotion_failures, {{"tier", std::string(TierName(t))}},
              static_cast<double>(m.tier(t).promotion_failures));
  }
  std::vector<MetricFamily> out;
  for (MetricFamily* f : {&puts, &gets, &promotion_failures}) out.push_back(std::move(*f));
  return out;
}

// Moves down to T2 and back, and what T2 held at start.
std::vector<MetricFamily> DemotionFamilies(const TierSnapshot& s) {
  const TierManagerStats& m = s.manager;
  MetricFamily demotions = NewFamily(
      "kvtier_demotions_total",
      "Blocks written down one tier (T0 to T1, T1 to T2, T2 to T3), by the tier they left and "
      "outcome.",
      MetricType::Counter);
  const std::vector<Tier> present = PresentTiers(s);
  for (Tier t : present) {
    if (t == present.back()) continue;  // the last tier: its victims are deleted
    const std::string name(TierName(t));
    AddSample(demotions, {{"result", "written"}, {"tier", name}},
              static_cast<double>(m.tier(t).moved_down));
    AddSample(demotions, {{"result", "failed"}, {"tier", name}},
              static_cast<double>(m.tier(t).move_down_failures));
  }
  MetricFamily in_flight =
      NewFamily("kvtier_demotions_in_flight",
                "Moves between tiers (demotions, and promotions for reads) started and not yet "
                "complete.",
                MetricType::Gauge);
  AddSample(in_flight, {}, static_cast<double>(m.moves_in_flight));
  MetricFamily recovered = NewFamily(
      "kvtier_recovered_blocks", "Blocks found in T2 at start (warm restart).", MetricType::Gauge);
  AddSample(recovered, {}, static_cast<double>(m.recovered_blocks));
  std::vector<MetricFamily> out;
  for (MetricFamily* f : {&demotions, &in_flight, &recovered}) out.push_back(std::move(*f));
  if (s.has_t0 || s.has_t2 || s.has_t3) {
    MetricFamily moved = NewFamily("kvtier_moved_bytes_total",
                                   "Payload bytes moved between tiers and clients, by direction.",
                                   MetricType::Counter);
    if (s.has_t0) {
      AddSample(moved, {{"direction", "t1_to_t0"}}, static_cast<double>(s.t0.write_bytes));
      AddSample(moved, {{"direction", "t0_to_t1"}}, static_cast<double>(s.t0.read_bytes));
    }
    if (s.has_t2) {
      AddSample(moved, {{"direction", "t1_to_t2"}}, static_cast<double>(s.t2.write_bytes));
      AddSample(moved, {{"direction", "t2_to_t1"}}, static_cast<double>(s.t2.read_bytes));
    }
    if (s.has_t3) {
      AddSample(moved, {{"direction", "to_t3"}}, static_cast<double>(s.t3.write_bytes));
      AddSample(moved, {{"direction", "t3_to_t1"}}, static_cast<double>(s.t3.read_bytes));
    }
    out.push_back(std::move(moved));
  }
  return out;
}

}  // namespace

TierSnapshot TakeTierSnapshot(const TierManager& manager, const RemoteTier* remote) {
  TierSnapshot s;
  s.manager = manager.Stats();
  s.t1 = manager.t1().Stats();
  if (manager.t0() != nullptr) {
    s.has_t0 = true;
    s.t0 = manager.t0()->Stats();
  }
  if (manager.t2() != nullptr) {
    s.has_t2 = true;
    s.t2 = manager.t2()->Stats();
  }
  if (manager.t3() != nullptr) {
    s.has_t3 = true;
    s.t3 = manager.t3()->Stats();
  }
  if (remote != nullptr) {
    s.has_remote = true;
    s.remote = remote->StoreStats();
  }
  return s;
}

std::vector<MetricFamily> TierFamilies(const TierSnapshot& snapshot) {
  std::vector<MetricFamily> families = CapacityFamilies(snapshot);
  MergeFamilies(families, EvictionFamilies(snapshot));
  MergeFamilies(families, PutGetFamilies(snapshot));
  MergeFamilies(families, DemotionFamilies(snapshot));
  if (snapshot.has_remote) MergeFamilies(families, RemoteFamilies(snapshot.remote));
  return families;
}

void MergeFamilies(std::vector<MetricFamily>& into, std::vector<MetricFamily> more) {
  for (MetricFamily& family : more) {
    auto same = std::find_if(into.begin(), into.end(),
                             [&](const MetricFamily& f) { return f.name == family.name; });
    if (same == into.end()) {
      into.push_back(std::move(family));
      continue;
    }
    for (ClientMetric& m : family.metric) same->metric.push_back(std::move(m));
  }
}

MetricsCollector::MetricsCollector(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {}

void AddLabel(std::vector<MetricFamily>& families, const ClientMetric::Label& label) {
  for (MetricFamily& family : families) {
    for (ClientMetric& m : family.metric) m.label.insert(m.label.begin(), label);
  }
}

void MetricsCollector::Watch(std::vector<WatchedPool> pools) {
  absl::MutexLock lock(&mu_);
  pools_ = std::move(pools);
}

std::vector<MetricFamily> MetricsCollector::Collect() const {
  std::vector<MetricFamily> families = registry_->Collect();
  absl::MutexLock lock(&mu_);
  for (const WatchedPool& pool : pools_) {
    std::vector<MetricFamily> tiers = TierFamilies(TakeTierSnapshot(*pool.manager, pool.remote));
    if (!pool.name.empty()) AddLabel(tiers, {"pool", pool.name});
    MergeFamilies(families, std::move(tiers));
  }
  return families;
}

}  // namespace kvtier::internal
