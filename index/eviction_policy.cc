// EvictionConfig validation and the policy factory. The policies live one per file (*_policy.cc).
#include "index/eviction_policy.h"

#include <cstdio>
#include <string>

#include "index/policies_internal.h"

namespace kvtier {
namespace {

constexpr std::string_view kNames = "lru, fifo, sieve, s3fifo, arc";

std::string FormatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

std::string_view EvictionPolicyNames() { return kNames; }

absl::Status EvictionConfig::Validate() const {
  if (policy != "lru" && policy != "fifo" && policy != "sieve" && policy != "s3fifo" &&
      policy != "arc") {
    return absl::InvalidArgumentError("eviction.policy: unknown policy '" + policy +
                                      "' (expected " + std::string(kNames) + ")");
  }
  if (capacity_blocks == 0) {
    return absl::InvalidArgumentError("eviction.capacity_blocks: must be > 0 (got 0)");
  }
  // Written so that NaN fails too.
  if (!(s3fifo_small_fraction > 0.0 && s3fifo_small_fraction < 1.0)) {
    return absl::InvalidArgumentError("eviction.s3fifo_small_fraction: must be in (0, 1) (got " +
                                      FormatDouble(s3fifo_small_fraction) + ")");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(const EvictionConfig& config) {
  KVTIER_RETURN_IF_ERROR(config.Validate());
  if (config.policy == "lru") return NewLruPolicy();
  if (config.policy == "fifo") return NewFifoPolicy();
  if (config.policy == "sieve") return NewSievePolicy();
  if (config.policy == "s3fifo") {
    return NewS3FifoPolicy(config.capacity_blocks, config.s3fifo_small_fraction);
  }
  return NewArcPolicy(config.capacity_blocks);
}

}  // namespace kvtier
