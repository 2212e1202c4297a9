// Replays a trace through a simulated tier stack (tier_stack.h) or Belady's optimum
// (index/belady.h) and counts what a cache of that shape would have saved.
//
// The replay contract (issue 2, checked by an independent implementation): for each request in
// file order, count its hash_ids present in the cache (block hits) and the length of its leading
// run of present ids (prefix hits); then insert or touch every id of the request from last to
// first, so a parent is always more recent than its children, evicting by the policy beyond the
// capacity. Ratios are over all block references. With several tiers, a block's hit is attributed
// to the highest tier holding it when the request arrives.
//
// Prefill tokens saved per request: prefix hits x block_tokens, capped by the request's prompt
// length (the last block of a prompt is usually partial); the cap is taken off the tier of the last
// prefix block. The cost model (cost_model.h) turns each request's tokens saved and bytes read per
// tier into seconds saved.
//
// Thread-safety: Simulate may run concurrently on the same const Trace.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "tools/replay/cost_model.h"
#include "tools/replay/tier_stack.h"
#include "tools/replay/trace.h"

namespace kvtier::replay {

struct SimOptions {
  CostModel cost;
  uint64_t block_bytes = 0;
  StackShape shape;  // where the simulated client puts and reads (tier_stack.h)  // KV bytes per
                     // block; 0 = unknown (bytes and read times count as 0)
  // Belady only: NextUseByRequest(trace) if the caller already has it (sweeps); else computed.
  const std::vector<uint32_t>* next_use = nullptr;
  // Called now and then with (requests done, requests total).
  std::function<void(uint64_t, uint64_t)> on_progress;
};

struct SimResult {
  std::vector<TierConfig> tiers;       // as simulated
  std::vector<TierCounters> counters;  // per tier
  uint64_t requests = 0;
  uint64_t block_refs = 0;
  uint64_t unique_blocks = 0;
  uint64_t input_tokens = 0;  // sum of prompt lengths
  uint64_t block_hits = 0;    // over all tiers
  uint64_t prefix_hits = 0;
  uint64_t tokens_saved = 0;
  double ttft_saving_s = 0;  // sum over requests of CostModel::RequestSaving

  double BlockHitRatio() const { return block_refs ? double(block_hits) / block_refs : 0.0; }
  double PrefixHitRatio() const { return block_refs ? double(prefix_hits) / block_refs : 0.0; }
};

// Simulates `tiers` over `trace`. A single tier whose policy is "opt" runs Belady with bypass
// (tie-breaks in belady.h); "opt" in a stack of several tiers is InvalidArgument, as is any
// invalid tier (ValidateTiers).
absl::StatusOr<SimResult> Simulate(const Trace& trace, const std::vector<TierConfig>& tiers,
                                   const SimOptions& options);

}  // namespace kvtier::replay
