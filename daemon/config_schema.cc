// The key table. Keys are named after the option structs' fields (t1.capacity_bytes is
// HostTierOptions::capacity_bytes), so the tiers' own Validate() messages name keys of this file.
// Defaults are not here: they are DefaultConfig()'s values, printed through each key's getter.
#include "daemon/config_schema.h"

#include "daemon/config_internal.h"
#include "daemon/config_key_types.h"
#include "index/admission_policy.h"
#include "index/eviction_policy.h"

namespace kvtier::config {
namespace {

std::vector<ConfigKey> DaemonKeys() {
  return {
      Text("daemon.data_directory",
           "The daemon's state directory; created (mode 0750) when missing",
           KVTIER_FIELD(daemon.data_directory)),
      Text("daemon.socket_path",
           "Unix socket of the control plane (<= 107 bytes); empty: <data_directory>/kvtierd.sock",
           KVTIER_FIELD(daemon.socket_path)),
      Text("daemon.key_scope_file",
           "The key-scope secret (192 bytes): set, a file the daemons of a fleet share (it must "
           "exist) so they derive the same keys for the remote tier; empty: "
           "<data_directory>/key-scope.secret, created on first start",
           KVTIER_FIELD(daemon.key_scope_file)),
      Mode("daemon.socket_mode",
           "File mode of the socket; with allowed_users/allowed_groups it decides who may connect"),
      List("daemon.allowed_users", "list of names or uids",
           "Users who may connect (SO_PEERCRED) besides the daemon's own user",
           KVTIER_FIELD(daemon.allowed_users), true),
      List("daemon.allowed_groups", "list of names or gids",
           "Groups whose members (primary or supplementary) may connect",
           KVTIER_FIELD(daemon.allowed_groups), true),
      Enum("daemon.log_level",
           {{"debug", log::Level::kDebug},
            {"info", log::Level::kInfo},
            {"warn", log::Level::kWarn},
            {"error", log::Level::kError}},
           "Least severe log lines written", KVTIER_FIELD(daemon.log_level)),
      Text("daemon.log_file", "Log file, appended to and reopened on SIGHUP; empty: stderr",
           KVTIER_FIELD(daemon.log_file)),
      Text("daemon.record_file",
           "Write every lookup here as a replay-format trace line (also --record); empty: off",
           KVTIER_FIELD(daemon.record_file)),
      Bool("daemon.flush_on_stop",
           "At SIGTERM/SIGINT, write T1's blocks that have no T2 copy to T2, so a clean restart "
           "finds them (needs t2.enabled); stopping takes longer",
           KVTIER_FIELD(daemon.flush_on_stop)),
      Uint("daemon.flush_on_stop_seconds",
           "Most seconds flush_on_stop may take (<= 3600); blocks not written by then are lost",
           KVTIER_FIELD(daemon.flush_on_stop_seconds)),
      Bool("daemon.verify_puts",
           "put_commit checks every payload against the client's checksum before publishing it",
           KVTIER_FIELD(daemon.verify_puts)),
      Uint("daemon.spin_us",
           "Microseconds a connection's thread polls its idle rings before it sleeps on the "
           "doorbell (<= 1000000): lower it where clients outnumber the CPUs",
           KVTIER_FIELD(daemon.spin_us)),
      Uint("daemon.spin_threads",
           "Most connection threads polling at once (the others sleep when idle); 0: half the "
           "CPUs the daemon may run on, at least one",
           KVTIER_FIELD(daemon.spin_threads)),
      Uint("daemon.verify_threads",
           "Threads hashing the payloads of one large put_commit (>= 8 MiB) in parallel; 0: the "
           "connection's own thread",
           KVTIER_FIELD(daemon.verify_threads)),
      Uint("daemon.max_connections",
           "Most clients connected at once; a Hello beyond it is refused (ResourceExhausted)",
           KVTIER_FIELD(daemon.max_connections)),
      Uint("daemon.max_ring_entries",
           "Most entries per ring one client may ask for, in [256, 65536]; a Hello asking more is "
           "refused",
           KVTIER_FIELD(daemon.max_ring_entries)),
      Size("daemon.max_arena_bytes",
           "Most arena bytes one client may ask for, in [2MiB, 1GiB]; a Hello asking more is "
           "refused",
           KVTIER_FIELD(daemon.max_arena_bytes)),
      Uint("daemon.max_working_slots",
           "Most working slots (unkeyed T0 and T1 slots a client fills, then publishes or frees) "
           "one client may hold at once; beyond it work_take answers OverQuota; 0: none",
           KVTIER_FIELD(daemon.max_working_slots)),
      Bool("metrics.enabled", "Serve Prometheus metrics", KVTIER_FIELD(metrics.enabled)),
      Text("metrics.listen_address",
           "host:port of the metrics endpoint; not authenticated, so loopback by default",
           KVTIER_FIELD(metrics.listen_address)),
      Uint("metrics.threads",
           "HTTP threads, in [1, 1024]: connections served at once (an idle one holds a thread "
           "until metrics.request_timeout_ms)",
           KVTIER_FIELD(metrics.threads)),
      Uint("metrics.request_timeout_ms",
           "A connection must send its request within this (and take the answer), else it is "
           "closed; in [1, 600000]",
           KVTIER_FIELD(metrics.request_timeout_ms)),
      Text("pool.name",
           "Name of the one memory pool (every allowed client maps its T1 segment); with "
           "[[pools]]: the pool of a client that may use several and names none in its Hello",
           KVTIER_FIELD(pool.name)),
      Uint("index.num_shards", "Shards (and locks) of the block index: a power of two <= 4096",
           KVTIER_FIELD(tiers.index.num_shards)),
      Uint("index.expected_entries", "Entries the index is sized for up front; 0: grow from small",
           KVTIER_FIELD(tiers.index.expected_entries)),
      Uint("index.max_entries", "Most entries the index holds; 0: the tiers' slot counts",
           KVTIER_FIELD(tiers.index.max_entries)),
  };
}

// The keys of one tier's TierPolicyOptions, under `tier` ("t1", "t2").
template <typename P>
std::vector<ConfigKey> PolicyKeys(const std::string& tier, P policy) {
  auto at = [policy](auto member) {
    return [ policy, member ](auto& c) -> auto& { return policy(c).*member; };
  };
  auto eviction = [policy](auto member) {
    return [ policy, member ](auto& c) -> auto& { return policy(c).eviction.*member; };
  };
  auto admission = [policy](auto member) {
    return [ policy, member ](auto& c) -> auto& { return policy(c).admission.*member; };
  };
  return {
      Fraction(tier + ".high_watermark", "fraction in (0, 1]",
               "Occupancy above which blocks are evicted (demoted where the tier below admits)",
               at(&TierPolicyOptions::high_watermark)),
      Fraction(tier + ".low_watermark", "fraction in (0, 1]",
               "Occupancy eviction brings the tier back down to; <= high_watermark",
               at(&TierPolicyOptions::low_watermark)),
      Bool(tier + ".leaf_first", "Prefix-aware: evict only blocks with no resident child",
           at(&TierPolicyOptions::leaf_first)),
      Choice(tier + ".eviction.policy", SplitNames(EvictionPolicyNames()),
             "Which resident block leaves next", eviction(&EvictionConfig::policy)),
      Fraction(tier + ".eviction.s3fifo_small_fraction", "fraction in (0, 1)",
               "s3fifo: share of the tier given to the probationary queue",
               eviction(&EvictionConfig::s3fifo_small_fraction)),
      Choice(tier + ".admission.policy", SplitNames(AdmissionPolicyNames()),
             "Which blocks may enter: all, or those seen twice within the window",
             admission(&AdmissionConfig::policy)),
      Uint(tier + ".admission.window_blocks",
           "second: recent attempts remembered; 0: the tier's capacity in blocks",
           admission(&AdmissionConfig::window_blocks)),
  };
}

std::vector<ConfigKey> T1Keys() {
  std::vector<ConfigKey> keys = {
      Size("t1.capacity_bytes", "Size of the pinned host DRAM segment",
           KVTIER_FIELD(tiers.t1.capacity_bytes)),
      Size("t1.slot_bytes",
           "Bytes per slot (largest block payload), a multiple of 4096; T2 slots are the same",
           KVTIER_FIELD(tiers.t1.slot_bytes)),
      Text("t1.numa_pci_bus_id",
           "PCI bus id to place T1 near (the GPU), e.g. 0000:3b:00.0; empty: the start thread's "
           "node",
           KVTIER_FIELD(tiers.t1.numa_pci_bus_id)),
      Uint("t1.touch_threads", "Threads faulting T1 in at start; 0: one per hardware thread",
           KVTIER_FIELD(tiers.t1.touch_threads)),
      Enum("t1.huge_pages",
           {{"auto", HugePages::kAuto}, {"on", HugePages::kOn}, {"off", HugePages::kOff}},
           "2 MiB pages: auto uses them when reserved, on requires them",
           KVTIER_FIELD(tiers.t1.huge_pages)),
      Size("t1.dma_chunk_bytes",
           "Registered with the GPU this much at a time; a multiple of slot_bytes",
           KVTIER_FIELD(tiers.t1.dma_chunk_bytes)),
      Size("t1.first_ready_bytes",
           "kvtierd serves once this much of T1 is usable; the rest grows in the background; 0: "
           "wait for all of it",
           KVTIER_FIELD(tiers.t1.first_ready_bytes)),
  };
  for (ConfigKey& k : PolicyKeys("t1", KVTIER_FIELD(tiers.t1_policy))) {
    // T1 is where puts are born, and a put is never refused: its admission is "all" only
    // (TierManagerOptions::Validate says the same to a caller that builds options by hand).
    if (k.name == "t1.admission.policy") {
      k = Choice("t1.admission.policy", {"all"},
                 "T1 admits every put (the daemon never refuses one; filter what reaches NVMe "
                 "with `t2.admission`)",
                 KVTIER_FIELD(tiers.t1_policy.admission.policy));
    }
    keys.push_back(std::move(k));
  }
  return keys;
}

std::vector<ConfigKey> T0Keys() {
  std::vector<ConfigKey> keys = {
      Bool(
          "t0.enabled",
          "Run the GPU HBM tier (needs a cuda or hip build and a GPU); its slots are t1.slot_bytes",
          KVTIER_FIELD(t0_enabled)),
      Uint("t0.device", "GPU ordinal, as the runtime numbers them (after CUDA_VISIBLE_DEVICES)",
           KVTIER_FIELD(tiers.t0->device)),
      Size("t0.capacity_bytes", "Size of the device pool; 0: t0.free_fraction of the free memory",
           KVTIER_FIELD(tiers.t0->capacity_bytes)),
      Fraction("t0.free_fraction", "fraction in (0, 1]",
               "With capacity_bytes 0: this share of the GPU memory free at start",
               KVTIER_FIELD(tiers.t0->free_fraction)),
      Bool("t0.write_through",
           "Copy each block born in T0 to T1 in the background, keeping it in T0, so T0 evicts "
           "without a copy when a promotion needs room",
           KVTIER_FIELD(tiers.t0_write_through)),
  };
  for (ConfigKey& k : PolicyKeys("t0", KVTIER_FIELD(tiers.t0_policy))) keys.push_back(std::move(k));
  return keys;
}

std::vector<ConfigKey> T2Keys() {
  std::vector<ConfigKey> keys = {
      Bool("t2.enabled", "Run the NVMe tier; false: T1 victims are dropped",
           KVTIER_FIELD(t2_enabled)),
      List("t2.directories", "list of paths",
           "One directory per device, each with a slot file and an io_uring; must exist unless "
           "inside data_directory; empty: <data_directory>/t2",
           KVTIER_FIELD(tiers.t2->directories), false),
      Size("t2.capacity_bytes", "Bytes of slots per directory; a multiple of t1.slot_bytes",
           KVTIER_FIELD(tiers.t2->capacity_bytes)),
      Uint("t2.queue_depth", "I/Os in flight per directory, in [1, 4096]",
           KVTIER_FIELD(tiers.t2->queue_depth)),
      Enum("t2.durability",
           {{"none", T2Durability::kNone}, {"fdatasync", T2Durability::kFdatasync}},
           "fdatasync: a block is published only once its data and record are on disk",
           KVTIER_FIELD(tiers.t2->durability)),
      Text("t2.metadata_directory", "RocksDB records of T2; empty: <directories[0]>/kvtier-t2-meta",
           KVTIER_FIELD(tiers.t2->metadata_directory)),
      Bool("t2.preallocate", "Allocate the slot files at start, so a full disk shows then",
           KVTIER_FIELD(tiers.t2->preallocate)),
      Uint("t2.verify_threads",
           "Threads checking read payloads against their checksums; 0: one per CPU, at most 8",
           KVTIER_FIELD(tiers.t2->verify_threads)),
      Uint("t2.admission_probe_interval_ms",
           "After a full disk stopped admission, how often to probe whether space came back",
           KVTIER_FIELD(tiers.t2->admission_probe_interval_ms)),
      Uint("t2.max_demotions_in_flight", "T1 -> T2 writes in flight at once; > 0",
           KVTIER_FIELD(tiers.max_demotions_in_flight)),
  };
  for (ConfigKey& k : PolicyKeys("t2", KVTIER_FIELD(tiers.t2_policy))) keys.push_back(std::move(k));
  return keys;
}

// remote.cluster: a bool, or "auto".
ConfigKey ClusterKey() {
  return {"remote.cluster",
          "true | false | auto",
          "Redis Cluster routing (CRC16 slots, MOVED/ASK); auto asks the first node that "
          "answers; false takes exactly one node",
          CliForm::kValue,
          [](const toml::node& v, DaemonConfig& c) -> absl::Status {
            if (v.is_boolean()) {
              c.remote.store.cluster =
                  *v.value<bool>() ? ClusterMode::kCluster : ClusterMode::kStandalone;
              return absl::OkStatus();
            }
            KVTIER_ASSIGN_OR_RETURN(const std::string s, ReadChoice(v, {"auto"}));
            c.remote.store.cluster = ClusterMode::kAuto;
            return absl::OkStatus();
          },
          [](const DaemonConfig& c) -> std::string {
            switch (c.remote.store.cluster) {
              case ClusterMode::kCluster:
                return "true";
              case ClusterMode::kStandalone:
                return "false";
              default:
                return Quote("auto");
            }
          }};
}

// [remote]: the store (RemoteStoreOptions), this daemon's use of it (RemoteTierOptions), and its
// rung's policy.
std::vector<ConfigKey> RemoteKeys() {
  std::vector<ConfigKey> keys = {
      Bool("remote.enabled",
           "Run T3, the remote tier, on a Redis-protocol store shared by the daemons of a fleet",
           KVTIER_FIELD(remote_enabled)),
      List("remote.nodes", "list of host:port",
           "The standalone node, or any nodes of a cluster (the rest are learned from CLUSTER "
           "SLOTS); IPv6 as [addr]:port",
           KVTIER_FIELD(remote.store.nodes), false),
      ClusterKey(),
      Text("remote.user", "ACL user for AUTH user password; empty: the default user",
           KVTIER_FIELD(remote.store.user)),
      Text("remote.password", "Password; empty and no password_file: no AUTH",
           KVTIER_FIELD(remote.store.password)),
      Text("remote.password_file",
           "File whose first line is the password (mode 0600); not with remote.password",
           KVTIER_FIELD(remote.store.password_file)),
      Uint("remote.connect_timeout_ms", "Connect timeout per node, in [1, 600000]",
           KVTIER_FIELD(remote.store.connect_timeout_ms)),
      Uint("remote.command_timeout_ms",
           "Limit on each socket read or write of a batch, in [1, 600000]",
           KVTIER_FIELD(remote.store.command_timeout_ms)),
      Uint("remote.pool_per_node", "Idle connections kept per node, in [1, 1024]",
           KVTIER_FIELD(remote.store.pool_per_node)),
      Uint("remote.max_pipeline",
           "Commands sent on one connection before their replies are read, in [1, 4096]",
           KVTIER_FIELD(remote.store.max_pipeline)),
      Uint("remote.reconnect_backoff_min_ms",
           "Wait after a failed connect to a node before the next; doubles per failure",
           KVTIER_FIELD(remote.store.reconnect_backoff_min_ms)),
      Uint("remote.reconnect_backoff_max_ms", "Longest such wait; >= reconnect_backoff_min_ms",
           KVTIER_FIELD(remote.store.reconnect_backoff_max_ms)),
      Uint("remote.breaker_failures",
           "Calls in a row that got no answer at all before the tier is marked unavailable",
           KVTIER_FIELD(remote.store.breaker_failures)),
      Uint("remote.breaker_open_ms",
           "Wait before the first probe of an unavailable store; doubles per failed probe",
           KVTIER_FIELD(remote.store.breaker_open_ms)),
      Uint("remote.breaker_open_max_ms", "Longest wait between probes; >= breaker_open_ms",
           KVTIER_FIELD(remote.store.breaker_open_max_ms)),
      Bool("remote.verify_puts",
           "Hash every payload written to the store and refuse one that does not match its "
           "checksum",
           KVTIER_FIELD(remote.store.verify_puts)),
      Text("remote.key_prefix",
           "Put before each block key in the store (<= 64 bytes, no { or }); daemons that share "
           "blocks use the same prefix and key-scope secret",
           KVTIER_FIELD(remote.store.key_prefix)),
      Size("remote.capacity_bytes",
           "This daemon's view of the store: the most remote blocks it remembers (a multiple of "
           "t1.slot_bytes); lookups find the others by asking the store",
           KVTIER_FIELD(remote.capacity_bytes)),
      Uint("remote.threads", "Threads making store calls (writes, reads, lookups), in [1, 256]",
           KVTIER_FIELD(remote.threads)),
      Uint("remote.lookup_budget_us",
           "Most microseconds a lookup that misses locally waits for the store, in [1, 1000000]",
           KVTIER_FIELD(remote.lookup_budget_us)),
      Uint("remote.lookup_max_blocks",
           "Most blocks past the local prefix one lookup asks the store about, in [1, 65536]",
           KVTIER_FIELD(remote.lookup_max_blocks)),
  };
  for (ConfigKey& k : PolicyKeys("remote", KVTIER_FIELD(tiers.t3_policy))) {
    keys.push_back(std::move(k));
  }
  return keys;
}

// pools: the [[pools]] entries (config_pools.cc), one value of the top level.
ConfigKey PoolsKey() {
  return {"pools",
          "array of tables",
          "Several memory pools, each its own T1 segment, T0 allocation, T2 directories and "
          "eviction, used only by the users and groups it names ([[pools]] entries with keys " +
              PoolKeyNames() + "; docs/configuration.md \"Memory pools\"); empty: the one [pool]",
          CliForm::kValue,
          [](const toml::node& v, DaemonConfig& c) -> absl::Status {
            KVTIER_ASSIGN_OR_RETURN(c.pools, ReadPools(v));
            return absl::OkStatus();
          },
          [](const DaemonConfig& c) { return FormatPools(c.pools); }};
}

std::vector<ConfigKey> BuildKeys() {
  std::vector<ConfigKey> keys = {PoolsKey()};
  for (ConfigKey& k : DaemonKeys()) keys.push_back(std::move(k));
  for (auto* part : {&T0Keys, &T1Keys, &T2Keys, &RemoteKeys}) {
    for (ConfigKey& k : part()) keys.push_back(std::move(k));
  }
  return keys;
}

}  // namespace
}  // namespace kvtier::config

namespace kvtier {

const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey>* const keys = new std::vector<ConfigKey>(config::BuildKeys());
  return *keys;
}

const std::vector<ConfigSection>& ConfigSections() {
  static const std::vector<ConfigSection>* const sections = new std::vector<ConfigSection>{
      {"daemon", "The process and its control socket (docs/configuration.md: access control)."},
      {"metrics", "The Prometheus endpoint."},
      {"pool",
       "Memory isolation: one pool, one T1 segment mapped by every client (the default; "
       "`pools` above declares several)."},
      {"index", "The block index (what is cached where)."},
      {"t0", "T0: GPU HBM, one device pool cut into slots, shared with clients on that GPU."},
      {"t0.eviction", "Which T0 block is demoted (to T1) next."},
      {"t0.admission", "Which blocks may enter T0."},
      {"t1", "T1: pinned host DRAM, one shared-memory segment cut into slots."},
      {"t1.eviction", "Which T1 block is demoted next."},
      {"t1.admission", "Which new blocks may enter T1 (keep \"all\": a refused put is lost)."},
      {"t2", "T2: NVMe, O_DIRECT slot files, records in RocksDB."},
      {"t2.eviction", "Which T2 block is deleted next."},
      {"t2.admission", "Which T1 victims may be written to T2."},
      {"remote", "T3: the remote tier, a Redis-protocol store the daemons of a fleet share."},
      {"remote.eviction",
       "Which remote block this daemon forgets next (the store evicts by "
       "its own maxmemory-policy)."},
      {"remote.admission", "Which T2 victims (T1's without a T2) may be written to the store."},
  };
  return *sections;
}

const ConfigKey* FindConfigKey(std::string_view name) {
  for (const ConfigKey& key : ConfigKeys()) {
    if (key.name == name) return &key;
  }
  return nullptr;
}

std::string_view SectionOf(std::string_view key_name) {
  const size_t dot = key_name.rfind('.');
  return dot == key_name.npos ? std::string_view() : key_name.substr(0, dot);
}

}  // namespace kvtier
