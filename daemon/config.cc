// DaemonConfig's defaults, what the tier manager gets, and the checks that need no file system.
#include "daemon/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <string_view>
#include <vector>

#include "daemon/config_internal.h"

namespace kvtier {
namespace {

constexpr size_t kMaxSocketPath = 107;  // sizeof(sockaddr_un::sun_path) - 1
constexpr uint64_t kMaxT2SlotBytes = uint64_t{1} << 30;
constexpr uint32_t kMaxFlushOnStopSeconds = 3600;

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// The problems of one validation, each a line naming its key; every check runs, so one load
// reports all of them.
class Checks {
 public:
  void Add(const absl::Status& status) {
    if (!status.ok()) lines_.emplace_back(status.message());
  }
  // `tier` in front of each line of `status` (EvictionConfig says "eviction.policy: ...").
  void AddPrefixed(const std::string& tier, const absl::Status& status) {
    if (status.ok()) return;
    const std::string message(status.message());
    std::string_view rest = message;
    while (!rest.empty()) {
      const std::string_view line = rest.substr(0, rest.find('\n'));
      rest.remove_prefix(std::min(rest.size(), line.size() + 1));
      lines_.push_back(fmt::format("{}.{}", tier, line));
    }
  }
  absl::Status Result() const {
    if (lines_.empty()) return absl::OkStatus();
    return Invalid(fmt::format("{}", fmt::join(lines_, "\n")));
  }

 private:
  std::vector<std::string> lines_;
};

// "host:port" or "[v6]:port", port in [1, 65535].
absl::Status ValidateListenAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  const std::string host = colon == address.npos ? "" : address.substr(0, colon);
  const std::string port = colon == address.npos ? "" : address.substr(colon + 1);
  const bool bracketed = host.starts_with('[') && host.ends_with(']');
  const bool bad_host = host.empty() || (!bracketed && host.find(':') != host.npos);
  const bool digits =
      !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == port.npos;
  if (bad_host || !digits || std::stoul(port) == 0 || std::stoul(port) > 65535) {
    return Invalid(fmt::format(
        "metrics.listen_address: '{}' is not host:port (e.g. 127.0.0.1:9464 or [::1]:9464)",
        address));
  }
  return absl::OkStatus();
}

void ValidateDaemon(const DaemonConfig& c, Checks& checks) {
  if (c.daemon.data_directory.empty()) {
    checks.Add(Invalid("daemon.data_directory: must not be empty"));
  }
  const std::string socket = c.SocketPath();
  if (socket.empty() || socket.size() > kMaxSocketPath) {
    checks.Add(
        Invalid(fmt::format("daemon.socket_path: '{}' must be 1 to {} bytes long (a Unix socket "
                            "address), it is {}",
                            socket, kMaxSocketPath, socket.size())));
  }
  if (c.daemon.spin_threads > 4096) {
    checks.Add(
        Invalid(fmt::format("daemon.spin_threads: {} is more than 4096", c.daemon.spin_threads)));
  }
  if (c.daemon.flush_on_stop_seconds > kMaxFlushOnStopSeconds) {
    checks.Add(Invalid(fmt::format("daemon.flush_on_stop_seconds: {} is more than {} (one hour)",
                                   c.daemon.flush_on_stop_seconds, kMaxFlushOnStopSeconds)));
  }
  if (c.daemon.spin_us > 1'000'000) {
    checks.Add(Invalid(
        fmt::format("daemon.spin_us: {} is more than 1000000 (one second)", c.daemon.spin_us)));
  }
  checks.Add(ValidateListenAddress(c.metrics.listen_address));
  const std::string& pool = c.pool.name;
  const bool pool_ok = !pool.empty() && std::all_of(pool.begin(), pool.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
  if (!pool_ok) {
    checks.Add(Invalid(fmt::format("pool.name: '{}' must be letters, digits, _ or -", pool)));
  }
}

// The limits on clients and on the metrics endpoint's HTTP server. The floors are what a Hello
// asking for 0 gets (256 ring entries, a 2 MiB arena: ServerOptions), the ceilings the protocol's.
void ValidateLimits(const DaemonConfig& c, Checks& checks) {
  const DaemonSettings& d = c.daemon;
  if (d.max_connections == 0) checks.Add(Invalid("daemon.max_connections: must be > 0"));
  if (d.max_ring_entries < 256 || d.max_ring_entries > (1u << 16)) {
    checks.Add(Invalid(
        fmt::format("daemon.max_ring_entries: {} is not in [256, 65536]", d.max_ring_entries)));
  }
  if (d.max_arena_bytes < (2u << 20) || d.max_arena_bytes > (1u << 30)) {
    checks.Add(Invalid(
        fmt::format("daemon.max_arena_bytes: {} is not in [2MiB, 1GiB]", d.max_arena_bytes)));
  }
  if (c.metrics.threads == 0 || c.metrics.threads > 1024) {
    checks.Add(Invalid(fmt::format("metrics.threads: {} is not in [1, 1024]", c.metrics.threads)));
  }
  if (c.metrics.request_timeout_ms == 0 || c.metrics.request_timeout_ms > 600'000) {
    checks.Add(Invalid(fmt::format("metrics.request_timeout_ms: {} is not in [1, 600000]",
                                   c.metrics.request_timeout_ms)));
  }
}

void ValidateIndex(const BlockIndexOptions& o, Checks& checks) {
  constexpr size_t kMax = size_t{1} << 32;
  if (o.num_shards == 0 || o.num_shards > 4096 || !std::has_single_bit(o.num_shards)) {
    checks.Add(Invalid(
        fmt::format("index.num_shards: {} is not a power of two in [1, 4096]", o.num_shards)));
  }
  if (o.expected_entries > kMax) {
    checks.Add(
        Invalid(fmt::format("index.expected_entries: {} is more than 2^32", o.expected_entries)));
  }
  if (o.max_entries != 0 && (o.max_entries > kMax || o.max_entries < o.expected_entries)) {
    checks.Add(Invalid(fmt::format(
        "index.max_entries: {} is not 0 (from the tiers) or in [index.expected_entries ({}), 2^32]",
        o.max_entries, o.expected_entries)));
  }
}

void ValidatePolicy(const std::string& tier, const TierPolicyOptions& p, Checks& checks) {
  bool in_range = true;
  for (const auto& [name, value] : {std::pair{"high_watermark", p.high_watermark},
                                    std::pair{"low_watermark", p.low_watermark}}) {
    if (!(value > 0.0 && value <= 1.0)) {
      checks.Add(Invalid(fmt::format("{}.{}: {} is not in (0, 1]", tier, name, value)));
      in_range = false;
    }
  }
  if (in_range && p.low_watermark > p.high_watermark) {
    checks.Add(Invalid(fmt::format("{}.low_watermark: {} is above {}.high_watermark ({})", tier,
                                   p.low_watermark, tier, p.high_watermark)));
  }
  EvictionConfig eviction = p.eviction;
  eviction.capacity_blocks = 1;  // set by the tier manager from the tier's slots
  checks.AddPrefixed(tier, eviction.Validate());
  AdmissionConfig admission = p.admission;
  if (admission.window_blocks == 0) admission.window_blocks = 1;  // 0: the tier's capacity
  checks.AddPrefixed(tier, admission.Validate());
}

// [t0] when enabled: DeviceTierOptions' own checks (slot size from t1) and its policy. Whether
// this build can drive a GPU, and whether one is there, start-up finds (the T0 tier says which):
// --check-config of a GPU host's file works on any machine.
void ValidateT0(const DaemonConfig& c, Checks& checks) {
  if (!c.t0_enabled) return;
  DeviceTierOptions t0 = *c.tiers.t0;
  t0.slot_bytes = c.tiers.t1.slot_bytes;
  checks.Add(t0.Validate());
  ValidatePolicy("t0", c.tiers.t0_policy, checks);
}

// What NvmeTierOptions::Validate checks without looking at the disk, named by this file's keys.
void ValidateT2(const DaemonConfig& c, Checks& checks) {
  const NvmeTierOptions& t2 = *c.tiers.t2;
  const uint32_t slot = c.tiers.t1.slot_bytes;
  if (slot > kMaxT2SlotBytes) {
    checks.Add(
        Invalid(fmt::format("t1.slot_bytes: {} is more than 1GiB, the largest T2 slot", slot)));
  }
  // A bad t1.slot_bytes is reported once, by [t1]'s checks; a capacity is judged only against a
  // good one.
  const bool slot_ok = slot != 0 && slot % 4096 == 0 && slot <= kMaxT2SlotBytes;
  if (t2.capacity_bytes == 0 || (slot_ok && t2.capacity_bytes % slot != 0)) {
    checks.Add(
        Invalid(fmt::format("t2.capacity_bytes: {} is not a positive multiple of "
                            "t1.slot_bytes ({})",
                            t2.capacity_bytes, slot)));
  }
  if (t2.queue_depth == 0 || t2.queue_depth > 4096) {
    checks.Add(Invalid(fmt::format("t2.queue_depth: {} is not in [1, 4096]", t2.queue_depth)));
  }
  if (t2.verify_threads > 64) {
    checks.Add(Invalid(fmt::format("t2.verify_threads: {} is not in [0, 64]", t2.verify_threads)));
  }
  if (c.tiers.max_demotions_in_flight == 0) {
    checks.Add(Invalid("t2.max_demotions_in_flight: must be > 0"));
  }
}

}  // namespace

DaemonConfig::DaemonConfig() {
  tiers.index.max_entries = 0;  // sized from the tiers
  tiers.t1.capacity_bytes = uint64_t{1} << 30;
  // 2 MiB: one 16-token block of an 8B model (128 KiB of KV per token).
  tiers.t1.slot_bytes = 2u << 20;
  tiers.t1_policy.admission.window_blocks = 0;
  tiers.t0.emplace();
  tiers.t0->slot_bytes = tiers.t1.slot_bytes;
  tiers.t0_policy.admission.window_blocks = 0;
  tiers.t2.emplace();
  tiers.t2->capacity_bytes = uint64_t{4} << 30;
  tiers.t2->slot_bytes = tiers.t1.slot_bytes;
  tiers.t2_policy.admission.window_blocks = 0;
  tiers.t3_policy.admission.window_blocks = 0;
}

TierManagerOptions DaemonConfig::ManagerOptions() const {
  TierManagerOptions o = tiers;
  if (!t0_enabled) {
    o.t0.reset();
  } else {
    o.t0->slot_bytes = tiers.t1.slot_bytes;
  }
  if (!t2_enabled) {
    o.t2.reset();
  } else {
    o.t2->slot_bytes = tiers.t1.slot_bytes;
    if (o.t2->directories.empty()) o.t2->directories = {daemon.data_directory + "/t2"};
  }
  return o;
}

std::string DaemonConfig::KeyScopePath() const {
  return daemon.key_scope_file.empty() ? daemon.data_directory + "/key-scope.secret"
                                       : daemon.key_scope_file;
}

RemoteTierOptions DaemonConfig::RemoteOptions() const {
  RemoteTierOptions o = remote;
  o.slot_bytes = tiers.t1.slot_bytes;
  return o;
}

std::string DaemonConfig::SocketPath() const {
  return daemon.socket_path.empty() ? daemon.data_directory + "/kvtierd.sock" : daemon.socket_path;
}

absl::Status ValidateConfig(const DaemonConfig& c) {
  Checks checks;
  ValidateDaemon(c, checks);
  ValidateLimits(c, checks);
  checks.Add(config::ValidatePools(c));
  ValidateIndex(c.tiers.index, checks);
  checks.Add(c.tiers.t1.Validate());
  ValidatePolicy("t1", c.tiers.t1_policy, checks);
  ValidateT0(c, checks);
  if (c.t2_enabled) {
    ValidateT2(c, checks);
    ValidatePolicy("t2", c.tiers.t2_policy, checks);
  }
  if (c.remote_enabled) {
    checks.Add(c.RemoteOptions().Validate());  // names remote.* keys; reads remote.password_file
    ValidatePolicy("remote", c.tiers.t3_policy, checks);
  }
  return checks.Result();
}

}  // namespace kvtier
