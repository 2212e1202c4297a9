#include "tools/replay/simulator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <optional>

#include "index/belady.h"

namespace kvtier::replay {
namespace {

constexpr uint64_t kProgressEvery = 4096;  // requests between progress callbacks

// The hit-side accounting of the contract, shared by the tier stack and Belady: hits, prefix hits,
// tokens saved and the cost model, per request, given each block's residency mask on arrival.
class Accounting {
 public:
  Accounting(const Trace& trace, const SimOptions& options, SimResult* result)
      : trace_(trace), options_(options), result_(result), tiers_(result->counters.size()) {}

  // `mask(id)` returns the block's tier bits (bit t = resident in tier t) before the request.
  template <typename MaskFn>
  void CountRequest(size_t r, MaskFn&& mask) {
    const uint64_t begin = trace_.request_begin[r], end = trace_.request_begin[r + 1];
    std::array<uint64_t, kMaxTiers> prefix{};
    uint64_t prefix_len = 0;
    size_t last_tier = 0;
    bool in_prefix = true;
    for (uint64_t i = begin; i < end; ++i) {
      const uint8_t m = mask(trace_.refs[i]);
      if (m == 0) {
        in_prefix = false;
        continue;
      }
      const size_t t = static_cast<size_t>(std::countr_zero(m));
      ++result_->counters[t].block_hits;
      if (in_prefix) {
        ++prefix[t];
        ++prefix_len;
        last_tier = t;
      }
    }
    if (prefix_len != 0) CountPrefix(r, prefix, last_tier);
  }

 private:
  void CountPrefix(size_t r, const std::array<uint64_t, kMaxTiers>& prefix, size_t last_tier) {
    std::array<uint64_t, kMaxTiers> tokens{}, bytes{};
    uint64_t total = 0;
    for (size_t t = 0; t < tiers_; ++t) {
      result_->counters[t].prefix_hits += prefix[t];
      tokens[t] = prefix[t] * trace_.block_tokens;
      bytes[t] = prefix[t] * options_.block_bytes;
      total += tokens[t];
    }
    // Cap at the prompt length, taking the excess off the last prefix block's tier first.
    const uint64_t input = trace_.input_tokens[r];
    uint64_t excess = total > input ? total - input : 0;
    for (size_t k = 0; k < tiers_ && excess != 0; ++k) {
      const size_t t = (last_tier + tiers_ - k) % tiers_;
      const uint64_t cut = std::min(excess, tokens[t]);
      tokens[t] -= cut;
      excess -= cut;
    }
    total = 0;
    for (size_t t = 0; t < tiers_; ++t) {
      result_->counters[t].tokens_saved += tokens[t];
      total += tokens[t];
    }
    result_->ttft_saving_s +=
        options_.cost.RequestSaving(total, absl::MakeConstSpan(bytes.data(), tiers_));
  }

  const Trace& trace_;
  const SimOptions& options_;
  SimResult* result_;
  size_t tiers_;
};

void Progress(const SimOptions& options, size_t r, size_t total) {
  if (options.on_progress && (r % kProgressEvery == 0 || r == total)) options.on_progress(r, total);
}

void RunStack(const Trace& trace, TierStack& stack, const SimOptions& options, SimResult* result) {
  Accounting accounting(trace, options, result);
  const size_t requests = trace.num_requests();
  const uint32_t* refs = trace.refs.data();
  for (size_t r = 0; r < requests; ++r) {
    // One request ahead is enough lead (a request takes far longer than a DRAM read) and little
    // enough data (a few dozen ids) to stay in the L1/L2 caches until it is needed.
    if (r + 1 < requests) {
      const uint64_t next = trace.request_begin[r + 1], after = trace.request_begin[r + 2];
      stack.Prefetch(absl::MakeConstSpan(refs + next, after - next));
    }
    accounting.CountRequest(r, [&stack](BlockId id) { return stack.ResidentMask(id); });
    const uint64_t begin = trace.request_begin[r], end = trace.request_begin[r + 1];
    for (uint64_t i = end; i-- > begin;)
      stack.Reference(refs[i], i > begin ? refs[i - 1] : kNoParent);
    Progress(options, r + 1, requests);
  }
  for (size_t t = 0; t < stack.num_tiers(); ++t) {
    const TierCounters policy_side = stack.counters(t);
    TierCounters& c = result->counters[t];
    c.promoted = policy_side.promoted;
    c.demoted = policy_side.demoted;
    c.written = policy_side.written;
    c.evictions = policy_side.evictions;
    c.rejected = policy_side.rejected;
  }
}

// Belady with bypass: `written` counts inserts, `rejected` counts bypassed blocks.
void RunBelady(const Trace& trace, size_t capacity, const std::vector<uint32_t>& next_use,
               const SimOptions& options, SimResult* result) {
  BeladyCache cache(capacity, trace.num_blocks());
  Accounting accounting(trace, options, result);
  TierCounters& c = result->counters[0];
  const size_t requests = trace.num_requests();
  for (size_t r = 0; r < requests; ++r) {
    accounting.CountRequest(r, [&cache](BlockId id) { return uint8_t{cache.Contains(id)}; });
    const uint64_t begin = trace.request_begin[r], end = trace.request_begin[r + 1];
    for (uint64_t i = end; i-- > begin;) {
      const auto res =
          cache.Reference(trace.refs[i], next_use[i], static_cast<uint32_t>(i - begin));
      c.written += res.outcome == BeladyCache::Outcome::kInserted;
      c.rejected += res.outcome == BeladyCache::Outcome::kBypassed;
      c.evictions += res.evicted.has_value();
    }
    Progress(options, r + 1, requests);
  }
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const Trace& trace, const std::vector<TierConfig>& tiers,
                                   const SimOptions& options) {
  KVTIER_RETURN_IF_ERROR(ValidateTiers(tiers));
  SimResult result;
  result.tiers = tiers;
  result.counters.resize(tiers.size());
  result.requests = trace.num_requests();
  result.block_refs = trace.num_refs();
  result.unique_blocks = trace.num_blocks();
  for (uint32_t tokens : trace.input_tokens) result.input_tokens += tokens;
  if (tiers[0].eviction.policy == "opt") {
    std::vector<uint32_t> computed;
    const std::vector<uint32_t>* next_use = options.next_use;
    if (next_use == nullptr) {
      computed = NextUseByRequest(trace.refs, trace.request_begin, trace.num_blocks());
      next_use = &computed;
    }
    RunBelady(trace, tiers[0].capacity_blocks, *next_use, options, &result);
  } else {
    KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<TierStack> stack,
                            TierStack::Create(tiers, trace.hash_ids, options.shape));
    RunStack(trace, *stack, options, &result);
  }
  for (const TierCounters& c : result.counters) {
    result.block_hits += c.block_hits;
    result.prefix_hits += c.prefix_hits;
    result.tokens_saved += c.tokens_saved;
  }
  return result;
}

}  // namespace kvtier::replay
