// The arguments of `kvtier replay`, parsed from the flags' text by our own code (not by CLI11's
// converters) so that every bad value is an InvalidArgument naming its flag -- and exit code 2.
//
// Tier specs (repeatable --tier, top tier first):
//   --tier "name=T1,capacity=10GiB,policy=s3fifo,admission=second,leaf_first,read_gbps=50"
// Keys: name (default T<index>), capacity (required), policy and admission (default --policy and
// --admission), admission_window (default --admission-window), leaf_first[=true|false] (default
// --leaf-first), read_gbps (default --read-gbps), latency_us (added once per request reading
// from the tier; default 0), climb_to (the name of a tier above that a read's copy from this one
// enters first; default the next one up). A remote tier, as the daemon's T3:
//   --tier "name=T3,capacity=1TiB,read_gbps=1.2,latency_us=300,climb_to=T1"
// Capacities: "20000" blocks; "10GiB", "1.5TB", "512MiB", "4096B" bytes (need the block size);
// "5%" of the trace's unique blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/replay/tier_stack.h"

namespace kvtier::replay {

struct Capacity {
  enum class Unit { kBlocks, kBytes, kFraction } unit = Unit::kBlocks;
  double value = 0;
};

// Parses a capacity as above; InvalidArgument "<where>: ..." otherwise.
absl::StatusOr<Capacity> ParseCapacity(const std::string& where, const std::string& text);
// To blocks: bytes / block_bytes (rounded down), fraction x unique_blocks (rounded). Bytes with
// block_bytes == 0 is InvalidArgument naming `where`.
absl::StatusOr<uint64_t> ResolveCapacity(const std::string& where, const Capacity& capacity,
                                         uint64_t block_bytes, uint64_t unique_blocks);

// One tier as given on the command line, before the trace fixes fractions and block sizes.
struct TierSpec {
  TierConfig config;  // capacity_blocks unset until resolved
  Capacity capacity;
  std::optional<double> read_gbps;
  double latency_us = 0;
  std::string climb_to;  // a tier name; empty: the next one up
};

// Defaults that a --tier spec inherits for keys it omits.
struct TierDefaults {
  std::string policy = "lru";
  std::string admission = "all";
  bool leaf_first = false;
  uint64_t admission_window = 0;  // 0 = the tier's capacity
};

// Parses the `index`-th --tier spec (0-based). Errors name the tier and the key.
absl::StatusOr<TierSpec> ParseTierSpec(size_t index, const std::string& text,
                                       const TierDefaults& defaults);

// Checks a policy / admission name; InvalidArgument "<flag>: unknown policy 'x' (one of ...)".
absl::Status CheckPolicyName(const std::string& flag, const std::string& name);
absl::Status CheckAdmissionName(const std::string& flag, const std::string& name);

// Splits "a,b,c" (no empty items; InvalidArgument naming `flag`).
absl::StatusOr<std::vector<std::string>> SplitList(const std::string& flag,
                                                   const std::string& text);
// A non-negative integer, whole text; InvalidArgument naming `flag`.
absl::StatusOr<uint64_t> ParseUint(const std::string& flag, const std::string& text);
// A positive finite number, whole text; InvalidArgument naming `flag`.
absl::StatusOr<double> ParsePositive(const std::string& flag, const std::string& text);

}  // namespace kvtier::replay
