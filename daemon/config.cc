// DaemonConfig's defaults, what the tier manager gets, and the checks that need no file system.
#include "daemon/config.h"

#include <fmt/format.h>

#include <bit>
#include <cctype>

namespace kvtier {
namespace {

constexpr size_t kMaxSocketPath = 107;  // sizeof(sockaddr_un::sun_path) - 1
constexpr uint64_t kMaxT2SlotBytes = uint64_t{1} << 30;

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

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

absl::Status ValidateDaemon(const DaemonConfig& c) {
  if (c.daemon.data_directory.empty()) return Invalid("daemon.data_directory: must not be empty");
  const std::string socket = c.SocketPath();
  if (socket.empty() || socket.size() > kMaxSocketPath) {
    return Invalid(
        fmt::format("daemon.socket_path: '{}' must be 1 to {} bytes long (a Unix socket "
                    "address), it is {}",
                    socket, kMaxSocketPath, socket.size()));
  }
  if (c.daemon.spin_threads > 4096) {
    return Invalid(fmt::format("daemon.spin_threads: {} is more than 4096", c.daemon.spin_threads));
  }
  if (c.daemon.spin_us > 1'000'000) {
    return Invalid(
        fmt::format("daemon.spin_us: {} is more than 1000000 (one second)", c.daemon.spin_us));
  }
  KVTIER_RETURN_IF_ERROR(ValidateListenAddress(c.metrics.listen_address));
  const std::string& pool = c.pool.name;
  const bool pool_ok = !pool.empty() && std::all_of(pool.begin(), pool.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
  if (!pool_ok)
    return Invalid(fmt::format("pool.name: '{}' must be letters, digits, _ or -", pool));
  return absl::OkStatus();
}

absl::Status ValidateIndex(const BlockIndexOptions& o) {
  constexpr size_t kMax = size_t{1} << 32;
  if (o.num_shards == 0 || o.num_shards > 4096 || !std::has_single_bit(o.num_shards)) {
    return Invalid(
        fmt::format("index.num_shards: {} is not a power of two in [1, 4096]", o.num_shards));
  }
  if (o.expected_entries > kMax) {
    return Invalid(fmt::format("index.expected_entries: {} is more than 2^32", o.expected_entries));
  }
  if (o.max_entries != 0 && (o.max_entries > kMax || o.max_entries < o.expected_entries)) {
    return Invalid(fmt::format(
        "index.max_entries: {} is not 0 (from the tiers) or in [index.expected_entries ({}), 2^32]",
        o.max_entries, o.expected_entries));
  }
  return absl::OkStatus();
}

// `status` with "<tier>." in front of its message (EvictionConfig says "eviction.policy: ...").
absl::Status Prefixed(const std::string& tier, absl::Status status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), fmt::format("{}.{}", tier, std::string(status.message())));
}

absl::Status ValidatePolicy(const std::string& tier, const TierPolicyOptions& p) {
  for (const auto& [name, value] : {std::pair{"high_watermark", p.high_watermark},
                                    std::pair{"low_watermark", p.low_watermark}}) {
    if (!(value > 0.0 && value <= 1.0)) {
      return Invalid(fmt::format("{}.{}: {} is not in (0, 1]", tier, name, value));
    }
  }
  if (p.low_watermark > p.high_watermark) {
    return Invalid(fmt::format("{}.low_watermark: {} is above {}.high_watermark ({})", tier,
                               p.low_watermark, tier, p.high_watermark));
  }
  EvictionConfig eviction = p.eviction;
  eviction.capacity_blocks = 1;  // set by the tier manager from the tier's slots
  KVTIER_RETURN_IF_ERROR(Prefixed(tier, eviction.Validate()));
  AdmissionConfig admission = p.admission;
  if (admission.window_blocks == 0) admission.window_blocks = 1;  // 0: the tier's capacity
  return Prefixed(tier, admission.Validate());
}

// [t0] when enabled: DeviceTierOptions' own checks (slot size from t1) and its policy. Whether
// this build can drive a GPU, and whether one is there, start-up finds (the T0 tier says which):
// --check-config of a GPU host's file works on any machine.
absl::Status ValidateT0(const DaemonConfig& c) {
  if (!c.t0_enabled) return absl::OkStatus();
  DeviceTierOptions t0 = *c.tiers.t0;
  t0.slot_bytes = c.tiers.t1.slot_bytes;
  KVTIER_RETURN_IF_ERROR(t0.Validate());
  return ValidatePolicy("t0", c.tiers.t0_policy);
}

// What NvmeTierOptions::Validate checks without looking at the disk, named by this file's keys.
absl::Status ValidateT2(const DaemonConfig& c) {
  const NvmeTierOptions& t2 = *c.tiers.t2;
  const uint32_t slot = c.tiers.t1.slot_bytes;
  if (slot > kMaxT2SlotBytes) {
    return Invalid(fmt::format("t1.slot_bytes: {} is more than 1GiB, the largest T2 slot", slot));
  }
  if (t2.capacity_bytes == 0 || slot == 0 || t2.capacity_bytes % slot != 0) {
    return Invalid(
        fmt::format("t2.capacity_bytes: {} is not a positive multiple of "
                    "t1.slot_bytes ({})",
                    t2.capacity_bytes, slot));
  }
  if (t2.queue_depth == 0 || t2.queue_depth > 4096) {
    return Invalid(fmt::format("t2.queue_depth: {} is not in [1, 4096]", t2.queue_depth));
  }
  if (c.tiers.max_demotions_in_flight == 0) {
    return Invalid("t2.max_demotions_in_flight: must be > 0");
  }
  return absl::OkStatus();
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

std::string DaemonConfig::SocketPath() const {
  return daemon.socket_path.empty() ? daemon.data_directory + "/kvtierd.sock" : daemon.socket_path;
}

absl::Status ValidateConfig(const DaemonConfig& c) {
  KVTIER_RETURN_IF_ERROR(ValidateDaemon(c));
  KVTIER_RETURN_IF_ERROR(ValidateIndex(c.tiers.index));
  KVTIER_RETURN_IF_ERROR(c.tiers.t1.Validate());
  KVTIER_RETURN_IF_ERROR(ValidatePolicy("t1", c.tiers.t1_policy));
  KVTIER_RETURN_IF_ERROR(ValidateT0(c));
  if (!c.t2_enabled) return absl::OkStatus();
  KVTIER_RETURN_IF_ERROR(ValidateT2(c));
  return ValidatePolicy("t2", c.tiers.t2_policy);
}

}  // namespace kvtier
