// kvtierd's configuration: one TOML file (configs/default.toml documents every key), overridden
// key by key from the command line, validated once, at load (DESIGN.md "Reliability rules": a bad
// config is a clear error that names the place, and nothing starts).
//
// Every key lives in one table (daemon/config_schema.h): its name, type, one line of doc, and how
// it is read and printed. The file loader, the command-line flags, `--print-config`, `--help` and
// docs/configuration.md all come from that table, so they cannot drift apart.
//
// Errors name the place and the key, e.g.
//   configs/x.toml:12: t1.capacity_bytes: '8 GB' is not a size; use e.g. 8GiB or 8589934592
//   --t1.low_watermark: 0.97 is above t1.high_watermark (0.95)
//
// Paths: every relative path (daemon.data_directory, daemon.socket_path, t2.directories, ...) is
// relative to the daemon's working directory. The socket and the T2 directory default to places
// inside daemon.data_directory (empty values below), so moving that one setting moves them all. The
// daemon creates daemon.data_directory, and the T2 directories inside it, when they are missing
// (PrepareDirectories); directories elsewhere (mount points of NVMe devices) must exist, so a typo
// fails instead of filling the root disk.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "tiers/remote/remote_tier.h"
#include "tiers/tier_manager_options.h"

namespace kvtier {

// [daemon]: the process and its control socket (DESIGN.md "Process model and protocol").
struct DaemonSettings {
  std::string data_directory = "kvtier-data";
  std::string socket_path;  // empty: <data_directory>/kvtierd.sock (SocketPath())
  // The key-scope secret (key_scope.h). Empty: <data_directory>/key-scope.secret, created on
  // first start. Set, it names a file shared by the daemons of a fleet (so they derive the same
  // daemon keys and share the remote tier's blocks); it must exist then (KeyScopePath()).
  std::string key_scope_file;
  uint32_t socket_mode = 0660;  // file mode of the socket; only permission bits (<= 0777)
  // Who may connect, checked with SO_PEERCRED: a peer whose uid is in allowed_uids, or whose
  // primary or supplementary gid is in allowed_gids, or who runs as the daemon's own uid. As
  // written (names or decimal ids) and as resolved at load (getpwnam/getgrnam); the resolved lists
  // drive the check.
  std::vector<std::string> allowed_users;
  std::vector<std::string> allowed_groups;
  std::vector<uid_t> allowed_uids;
  std::vector<gid_t> allowed_gids;
  // At SIGTERM/SIGINT, after the clients are closed, T1's blocks with no T2 copy are written to T2
  // (the tier manager's FlushT1), for at most flush_on_stop_seconds, so a clean restart finds
  // them. Without a T2 it does nothing. docs/configuration.md gives the trade-off.
  bool flush_on_stop = true;
  uint32_t flush_on_stop_seconds = 30;  // <= 3600
  log::Level log_level = log::Level::kInfo;
  std::string log_file;     // empty: stderr; else appended to, reopened on SIGHUP
  std::string record_file;  // empty: off; else every lookup as a replay-format trace line
  // put_commit checks each payload against its checksum (service.h). Off by default: demotion to
  // T2 checks it anyway before anything reaches disk, and the extra pass costs puts a third of
  // their speed (docs/configuration.md).
  bool verify_puts = false;
  uint32_t verify_threads = 4;  // threads hashing one large put_commit (service.h)
  uint32_t spin_us = 50;        // how long an idle connection thread polls before it sleeps
  uint32_t spin_threads = 0;    // connection threads polling at once; 0: half the CPUs
  // What clients may take (server.h ServerOptions): more is refused with an error naming the key.
  uint32_t max_connections = 256;        // clients connected at once
  uint32_t max_ring_entries = 4096;      // entries per ring one Hello may ask for
  uint32_t max_arena_bytes = 64u << 20;  // arena bytes one Hello may ask for
  uint32_t max_working_slots = 256;      // working slots (T0 + T1) one session may hold
};

// [metrics]: the Prometheus endpoint.
struct MetricsSettings {
  bool enabled = true;
  std::string listen_address = "127.0.0.1:9464";  // host:port ("[::1]:9464" for IPv6)
  // The HTTP server (metrics.h MetricsHttpOptions): connections served at once, and how long one
  // may take to send its request before it is closed.
  uint32_t threads = 8;
  uint32_t request_timeout_ms = 2000;
};

// [pool]: the single pool of a config without [[pools]] (DESIGN.md "Trust and isolation"): every
// client the daemon allows maps its one T1 segment. With [[pools]], `name` (when it names one of
// them) is the pool of a client allowed in several that names none in its Hello.
struct PoolSettings {
  std::string name = "default";
};

// One entry of [[pools]] (docs/configuration.md "Memory pools"): a pool is its own T1 segment
// (memfd), T0 allocation and T2 directories, with its own block index and eviction; only the users
// and groups named here (and root, the daemon's own user and daemon.allowed_users/allowed_groups)
// may use it. Zero or empty values take the defaults PoolPlans() states.
struct PoolSpec {
  std::string name;                        // letters, digits, _ or -; 1 to 32 bytes
  std::vector<std::string> users, groups;  // as written
  std::vector<uid_t> uids;                 // resolved at load
  std::vector<gid_t> gids;                 // resolved at load
  uint64_t t1_capacity_bytes = 0;          // 0: an even share of t1.capacity_bytes
  std::string numa_pci_bus_id;             // empty: t1.numa_pci_bus_id
  double t1_high_watermark = 0;            // 0: t1.high_watermark
  double t1_low_watermark = 0;             // 0: t1.low_watermark
  uint64_t t0_capacity_bytes = 0;          // 0: an even share of T0 (see PoolPlans)
  uint64_t t2_capacity_bytes = 0;          // 0: an even share of t2.capacity_bytes
};

// What the daemon builds for one pool: a tier manager over `tiers` and a service for the clients
// allowed in it.
struct PoolPlan {
  std::string name;
  std::vector<uid_t> uids;  // who may use it besides root and the daemon's own uid
  std::vector<gid_t> gids;
  TierManagerOptions tiers;                 // tiers.t3 is left null: the daemon opens `remote`
  std::optional<RemoteTierOptions> remote;  // T3, when remote.enabled
  // The pool's name is hashed into its daemon keys (key_scope.h), so blocks of two pools never
  // share a key, even in a store both reach (T3). False for the single [pool], whose keys are
  // those of every version before [[pools]] (its T2 survives the upgrade).
  bool pool_scoped_keys = false;
};

struct DaemonConfig {
  // The defaults: what a missing key means and what configs/default.toml spells out. Runs as an
  // unprivileged user on any machine: 1 GiB of T1, 4 GiB of T2 under ./kvtier-data, no GPU.
  DaemonConfig();

  DaemonSettings daemon;
  MetricsSettings metrics;
  PoolSettings pool;
  // [[pools]]: empty for a daemon of one pool ([pool], every allowed client in it).
  std::vector<PoolSpec> pools;
  // [index], [t1], [t2]. tiers.t2 always holds the [t2] values (so they print and round-trip while
  // t2_enabled is false); tiers.t2->slot_bytes is ignored (T2 slots are T1 slots), and empty
  // tiers.t2->directories means one directory, <data_directory>/t2.
  // [t0] likewise: tiers.t0 always holds the [t0] values; tiers.t0->slot_bytes is ignored (T0
  // slots are T1 slots). Off by default: the default config runs on a machine without a GPU.
  TierManagerOptions tiers;
  bool t0_enabled = false;
  bool t2_enabled = true;
  // [remote]: T3, the remote tier (tiers/remote/remote_tier.h). remote.slot_bytes is ignored (T3
  // slots are T1 slots); its ladder policy is tiers.t3_policy. Off by default.
  bool remote_enabled = false;
  RemoteTierOptions remote;
  // Where each key was last set: "path:line" or "--flag". For errors found after load.
  std::map<std::string, std::string> origins;

  // What the tier manager gets: t0 and t2 dropped when disabled, their slot_bytes = t1.slot_bytes,
  // the default T2 directory filled in.
  TierManagerOptions ManagerOptions() const;
  // The control socket's path, after the default above.
  std::string SocketPath() const;
  // The key-scope secret's path, and whether it must exist already (daemon.key_scope_file set).
  std::string KeyScopePath() const;
  bool KeyScopeShared() const { return !daemon.key_scope_file.empty(); }
  // The remote tier's options as the daemon opens them (slot_bytes = t1.slot_bytes).
  RemoteTierOptions RemoteOptions() const;
  // The pools the daemon runs, in config order. Without [[pools]]: one, named pool.name, for
  // daemon.allowed_uids/gids, over ManagerOptions(). With [[pools]]: one per entry, each over
  // ManagerOptions() with its own T1 (t1_capacity_bytes or t1.capacity_bytes / pools, in whole
  // slots; its NUMA placement and watermarks), T0 (t0_capacity_bytes, or t0.capacity_bytes /
  // pools, or t0.free_fraction / pools of the free memory) and T2 (each t2 directory's
  // <dir>/<name>, t2_capacity_bytes or t2.capacity_bytes / pools in whole slots; a set
  // t2.metadata_directory gets /<name> too), and daemon.allowed_uids/gids added to its own.
  // Precondition: a validated config.
  std::vector<PoolPlan> PoolPlans() const;
};

// One setting given on the command line. `origin` names it in errors ("--t1.capacity_bytes" or
// "--set t1.capacity_bytes").
struct ConfigOverride {
  std::string key;
  std::string value;
  std::string origin;
};

// Reads `path` (empty: no file, defaults only), applies `overrides` in order, resolves user and
// group names, and validates everything that needs no file system. InvalidArgument with every
// problem found, one per line, each naming the place (path:line or the flag) and the key: the
// file's in line order, then the flags'. A path that is not a readable regular file (a directory,
// a FIFO, ...) or is not TOML is the one problem reported. When there are problems, the directory
// checks of PrepareDirectories that need nothing created are run and reported with them.
absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path,
                                        const std::vector<ConfigOverride>& overrides);

// The checks that need no file system (LoadConfig runs them); every problem, one per line, each
// starting with its key. Exposed for tests.
absl::Status ValidateConfig(const DaemonConfig& config);

// Creates daemon.data_directory and the T2 directories inside it (mode 0750) when missing, then
// runs the checks that look at the file system (T2 directories exist and are writable). Every
// problem, one per line, prefixed with where its key was set.
absl::Status PrepareDirectories(const DaemonConfig& config);

// `status` with "<origin>: " in front of each line that starts with a key set in config.origins
// (or, for a key left at its default, names another key that was set).
absl::Status LocateError(const DaemonConfig& config, const absl::Status& status);

// The effective configuration as a commented TOML file (configs/default.toml is this for
// DaemonConfig()). Loading it gives the same configuration back.
std::string PrintConfig(const DaemonConfig& config);
// The key reference of docs/configuration.md, as Markdown.
std::string ConfigMarkdown();

}  // namespace kvtier
