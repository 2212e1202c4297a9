// The simple time-to-first-token model of `kvtier replay`: a prefix hit saves the prefill of its
// tokens but costs reading its KV from the tier that held it: bytes / the tier's read bandwidth,
// plus, once per request that reads from it, the tier's latency (a remote store's round trip;
// 0 for local tiers by default). The rates are operator flags; the defaults are the figures
// DESIGN.md measured or argues for (see kDefault* below).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/status.h"

namespace kvtier::replay {

// Prefill throughput of a dense ~8B model on one H100 at long prompts. DESIGN.md: recomputing 8K
// tokens takes ~10x the ~20 ms of loading them (<= ~40k tokens/s); attention grows with context,
// and the Mooncake prompts are 7K-27K tokens (p50-p90), so 10k tokens/s is the conservative figure.
inline constexpr double kDefaultPrefillTokensPerS = 10000;
// Read bandwidth into HBM per tier, GB/s (DESIGN.md "Performance" ceilings): T0 HBM->HBM 3000,
// T1 pinned host->HBM ~50, T2 io_uring O_DIRECT ~1.7. Deeper tiers default to the last value.
inline constexpr double kDefaultReadGbps[] = {3000, 50, 1.7};

struct CostModel {
  double prefill_tokens_per_s = kDefaultPrefillTokensPerS;
  std::vector<double> read_gbps;  // per tier; empty or short = defaults
  // Per tier, seconds added once to a request that reads any of its blocks from that tier; empty
  // or short = 0.
  std::vector<double> read_latency_s;

  // The read bandwidth of `tier` in bytes per second.
  double ReadBytesPerS(size_t tier) const;
  // InvalidArgument naming the flag for a non-positive rate.
  absl::Status Validate() const;

  // Seconds saved by one request: tokens_saved / prefill rate minus the time to read
  // bytes_loaded[t] from each tier t (and its latency when bytes_loaded[t] > 0); never below zero
  // (an engine would recompute instead).
  double RequestSaving(uint64_t tokens_saved, absl::Span<const uint64_t> bytes_loaded) const;
};

// Parses "3000,50,1.7" into per-tier GB/s values; InvalidArgument naming `flag` otherwise.
absl::StatusOr<std::vector<double>> ParseGbpsList(const std::string& flag, const std::string& text);

}  // namespace kvtier::replay
