// [[pools]]: reading and printing the entries, the checks across them, and the plan each pool runs
// with (config.h PoolSpec, PoolPlan; docs/configuration.md "Memory pools").
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/config.h"
#include "daemon/config_internal.h"
#include "daemon/config_values.h"

namespace kvtier {
namespace {

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// One key of a [[pools]] entry: how it is read and printed.
struct PoolKey {
  const char* name;
  std::function<absl::Status(const toml::node&, PoolSpec&)> set;
  std::function<std::string(const PoolSpec&)> get;
};

template <typename T>
PoolKey SizeKey(const char* name, T PoolSpec::*field) {
  return {name,
          [field](const toml::node& v, PoolSpec& p) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(p.*field, config::ReadSize(v));
            return absl::OkStatus();
          },
          [field](const PoolSpec& p) { return config::FormatSize(p.*field); }};
}

PoolKey TextKey(const char* name, std::string PoolSpec::*field) {
  return {name,
          [field](const toml::node& v, PoolSpec& p) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(p.*field, config::ReadString(v));
            return absl::OkStatus();
          },
          [field](const PoolSpec& p) { return config::Quote(p.*field); }};
}

PoolKey IdsKey(const char* name, std::vector<std::string> PoolSpec::*field) {
  return {name,
          [field](const toml::node& v, PoolSpec& p) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(p.*field, config::ReadIdList(v));
            return absl::OkStatus();
          },
          [field](const PoolSpec& p) { return config::FormatList(p.*field); }};
}

PoolKey FractionKey(const char* name, double PoolSpec::*field) {
  return {name,
          [field](const toml::node& v, PoolSpec& p) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(p.*field, config::ReadDouble(v));
            return absl::OkStatus();
          },
          [field](const PoolSpec& p) { return config::FormatDouble(p.*field); }};
}

const std::vector<PoolKey>& PoolKeys() {
  static const std::vector<PoolKey>* const keys = new std::vector<PoolKey>{
      TextKey("name", &PoolSpec::name),
      IdsKey("users", &PoolSpec::users),
      IdsKey("groups", &PoolSpec::groups),
      SizeKey("t1_capacity_bytes", &PoolSpec::t1_capacity_bytes),
      TextKey("numa_pci_bus_id", &PoolSpec::numa_pci_bus_id),
      FractionKey("t1_high_watermark", &PoolSpec::t1_high_watermark),
      FractionKey("t1_low_watermark", &PoolSpec::t1_low_watermark),
      SizeKey("t0_capacity_bytes", &PoolSpec::t0_capacity_bytes),
      SizeKey("t2_capacity_bytes", &PoolSpec::t2_capacity_bytes),
  };
  return *keys;
}

absl::StatusOr<PoolSpec> ReadPool(const toml::node& node, size_t i) {
  const toml::table* table = node.as_table();
  if (table == nullptr) return Invalid(fmt::format("pools[{}]: is not a table", i));
  PoolSpec pool;
  for (auto&& [k, v] : *table) {
    const std::string_view name = k.str();  // a lambda may not capture a structured binding
    const auto key = std::find_if(PoolKeys().begin(), PoolKeys().end(),
                                  [name](const PoolKey& p) { return name == p.name; });
    if (key == PoolKeys().end()) {
      std::vector<std::string> known;
      for (const PoolKey& p : PoolKeys()) known.emplace_back(p.name);
      return Invalid(
          fmt::format("pools[{}].{}: unknown key (known: {})", i, k.str(), fmt::join(known, ", ")));
    }
    if (absl::Status s = key->set(v, pool); !s.ok()) {
      return Invalid(fmt::format("pools[{}].{}: {}", i, k.str(), std::string(s.message())));
    }
  }
  return pool;
}

// `total` shared evenly by `n` pools, in whole slots.
uint64_t Share(uint64_t total, size_t n, uint64_t slot) {
  return slot == 0 ? 0 : total / n / slot * slot;
}

uint64_t T1Bytes(const DaemonConfig& c, const PoolSpec& p) {
  return p.t1_capacity_bytes != 0
             ? p.t1_capacity_bytes
             : Share(c.tiers.t1.capacity_bytes, c.pools.size(), c.tiers.t1.slot_bytes);
}

uint64_t T2Bytes(const DaemonConfig& c, const PoolSpec& p) {
  return p.t2_capacity_bytes != 0
             ? p.t2_capacity_bytes
             : Share(c.tiers.t2->capacity_bytes, c.pools.size(), c.tiers.t1.slot_bytes);
}

TierPolicyOptions T1Policy(const DaemonConfig& c, const PoolSpec& p) {
  TierPolicyOptions policy = c.tiers.t1_policy;
  if (p.t1_high_watermark != 0) policy.high_watermark = p.t1_high_watermark;
  if (p.t1_low_watermark != 0) policy.low_watermark = p.t1_low_watermark;
  return policy;
}

// Each pool's name: well formed and its own.
void CheckNames(const std::vector<PoolSpec>& pools, std::vector<std::string>& problems) {
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < pools.size(); ++i) {
    const std::string& name = pools[i].name;
    const bool ok =
        !name.empty() && name.size() <= 32 && std::all_of(name.begin(), name.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
        });
    if (!ok) {
      problems.push_back(
          fmt::format("pools[{}].name: '{}' must be 1 to 32 letters, digits, _ or -", i, name));
    } else if (auto [it, fresh] = seen.emplace(name, i); !fresh) {
      problems.push_back(
          fmt::format("pools[{}].name: '{}' is also the name of pools[{}]", i, name, it->second));
    }
  }
}

// Each pool names who may use it, and no user or group is named by two pools.
template <typename Id>
void CheckOverlap(const std::vector<PoolSpec>& pools, std::vector<Id> PoolSpec::*ids,
                  const char* key, std::vector<std::string>& problems) {
  std::map<Id, size_t> owner;
  for (size_t i = 0; i < pools.size(); ++i) {
    for (const Id id : pools[i].*ids) {
      auto [it, fresh] = owner.emplace(id, i);
      if (!fresh && it->second != i) {
        problems.push_back(fmt::format(
            "pools[{}].{}: id {} is also in pools[{}].{}; a user or group belongs to one pool "
            "(list it in daemon.allowed_{} to let it use every pool)",
            i, key, id, it->second, key, key));
      }
    }
  }
}

// The pools' own capacities: each whole slots, at least one, and together within the tier.
void CheckCapacity(const char* key, const char* total_key, uint64_t total, uint64_t slot,
                   const std::vector<uint64_t>& bytes, std::vector<std::string>& problems) {
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    sum += bytes[i];
    if (slot != 0 && (bytes[i] < slot || bytes[i] % slot != 0)) {
      problems.push_back(
          fmt::format("pools[{}].{}: {} is not a positive multiple of "
                      "t1.slot_bytes ({})",
                      i, key, bytes[i], slot));
    }
  }
  if (total != 0 && sum > total) {
    problems.push_back(fmt::format("pools: the pools' {} add up to {}, more than {} ({})", key, sum,
                                   total_key, total));
  }
}

void CheckWatermarks(const DaemonConfig& c, std::vector<std::string>& problems) {
  for (size_t i = 0; i < c.pools.size(); ++i) {
    const TierPolicyOptions p = T1Policy(c, c.pools[i]);
    for (const auto& [name, value] : {std::pair{"t1_high_watermark", p.high_watermark},
                                      std::pair{"t1_low_watermark", p.low_watermark}}) {
      if (!(value > 0.0 && value <= 1.0)) {
        problems.push_back(fmt::format("pools[{}].{}: {} is not in (0, 1]", i, name, value));
      }
    }
    if (p.low_watermark > p.high_watermark) {
      problems.push_back(
          fmt::format("pools[{}].t1_low_watermark: {} is above its high watermark "
                      "({})",
                      i, p.low_watermark, p.high_watermark));
    }
  }
}

void CheckCapacities(const DaemonConfig& c, std::vector<std::string>& problems) {
  const uint64_t slot = c.tiers.t1.slot_bytes;
  std::vector<uint64_t> t1, t0, t2;
  for (const PoolSpec& p : c.pools) {
    t1.push_back(T1Bytes(c, p));
    t2.push_back(T2Bytes(c, p));
    if (p.t0_capacity_bytes != 0) t0.push_back(p.t0_capacity_bytes);
  }
  CheckCapacity("t1_capacity_bytes", "t1.capacity_bytes", c.tiers.t1.capacity_bytes, slot, t1,
                problems);
  if (c.t2_enabled) {
    CheckCapacity("t2_capacity_bytes", "t2.capacity_bytes", c.tiers.t2->capacity_bytes, slot, t2,
                  problems);
  }
  if (c.t0_enabled) {
    CheckCapacity("t0_capacity_bytes", "t0.capacity_bytes", c.tiers.t0->capacity_bytes, 0, t0,
                  problems);
  }
}

// The single pool of a config without [[pools]].
PoolPlan SinglePlan(const DaemonConfig& c) {
  PoolPlan plan;
  plan.name = c.pool.name;
  plan.uids = c.daemon.allowed_uids;
  plan.gids = c.daemon.allowed_gids;
  plan.tiers = c.ManagerOptions();
  if (c.remote_enabled) plan.remote = c.RemoteOptions();
  return plan;
}

PoolPlan PlanOf(const DaemonConfig& c, const PoolSpec& p) {
  const size_t n = c.pools.size();
  PoolPlan plan;
  plan.name = p.name;
  plan.pool_scoped_keys = true;
  plan.uids = p.uids;
  plan.uids.insert(plan.uids.end(), c.daemon.allowed_uids.begin(), c.daemon.allowed_uids.end());
  plan.gids = p.gids;
  plan.gids.insert(plan.gids.end(), c.daemon.allowed_gids.begin(), c.daemon.allowed_gids.end());
  TierManagerOptions& o = plan.tiers;
  o = c.ManagerOptions();
  o.t1.capacity_bytes = T1Bytes(c, p);
  o.t1.segment_name = "kvtier-t1-" + p.name;
  if (!p.numa_pci_bus_id.empty()) o.t1.numa_pci_bus_id = p.numa_pci_bus_id;
  o.t1_policy = T1Policy(c, p);
  if (o.t0) {
    if (p.t0_capacity_bytes != 0) {
      o.t0->capacity_bytes = p.t0_capacity_bytes;
    } else if (o.t0->capacity_bytes != 0) {
      o.t0->capacity_bytes = o.t0->capacity_bytes / n;
    } else {
      o.t0->free_fraction = o.t0->free_fraction / static_cast<double>(n);
    }
  }
  if (o.t2) {
    o.t2->capacity_bytes = T2Bytes(c, p);
    for (std::string& dir : o.t2->directories) dir += "/" + p.name;
    if (!o.t2->metadata_directory.empty()) o.t2->metadata_directory += "/" + p.name;
  }
  if (c.remote_enabled) {
    plan.remote = c.RemoteOptions();
    plan.remote->capacity_bytes = Share(c.remote.capacity_bytes, n, c.tiers.t1.slot_bytes);
  }
  return plan;
}

}  // namespace

namespace config {

absl::StatusOr<std::vector<PoolSpec>> ReadPools(const toml::node& value) {
  const toml::array* array = value.as_array();
  if (array == nullptr) {
    return Invalid("is not an array of tables ([[pools]] entries, or [{name = \"a\", ...}])");
  }
  std::vector<PoolSpec> pools;
  for (size_t i = 0; i < array->size(); ++i) {
    KVTIER_ASSIGN_OR_RETURN(PoolSpec pool, ReadPool(*array->get(i), i));
    pools.push_back(std::move(pool));
  }
  return pools;
}

std::string FormatPools(const std::vector<PoolSpec>& pools) {
  std::vector<std::string> entries;
  for (const PoolSpec& p : pools) {
    std::vector<std::string> fields;
    for (const PoolKey& key : PoolKeys()) {
      fields.push_back(fmt::format("{} = {}", key.name, key.get(p)));
    }
    entries.push_back(fmt::format("{{ {} }}", fmt::join(fields, ", ")));
  }
  return fmt::format("[{}]", fmt::join(entries, ", "));
}

std::string PoolKeyNames() {
  std::vector<std::string> names;
  for (const PoolKey& p : PoolKeys()) names.emplace_back(p.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

absl::Status ValidatePools(const DaemonConfig& c) {
  if (c.pools.empty()) return absl::OkStatus();
  std::vector<std::string> problems;
  const bool named = std::any_of(c.pools.begin(), c.pools.end(),
                                 [&](const PoolSpec& p) { return p.name == c.pool.name; });
  if (c.pool.name != PoolSettings().name && !named) {
    problems.push_back(
        fmt::format("pool.name: '{}' is not the name of any [[pools]] entry (with "
                    "[[pools]] it names the pool of a client that may use several "
                    "and names none)",
                    c.pool.name));
  }
  CheckNames(c.pools, problems);
  for (size_t i = 0; i < c.pools.size(); ++i) {
    if (c.pools[i].users.empty() && c.pools[i].groups.empty()) {
      problems.push_back(
          fmt::format("pools[{}].users: empty, and so is its groups: name who may use pool '{}'", i,
                      c.pools[i].name));
    }
  }
  CheckOverlap(c.pools, &PoolSpec::uids, "users", problems);
  CheckOverlap(c.pools, &PoolSpec::gids, "groups", problems);
  CheckCapacities(c, problems);
  CheckWatermarks(c, problems);
  if (problems.empty()) return absl::OkStatus();
  return Invalid(fmt::format("{}", fmt::join(problems, "\n")));
}

}  // namespace config

std::vector<PoolPlan> DaemonConfig::PoolPlans() const {
  if (pools.empty()) return {SinglePlan(*this)};
  std::vector<PoolPlan> plans;
  for (const PoolSpec& p : pools) plans.push_back(PlanOf(*this, p));
  return plans;
}

}  // namespace kvtier
