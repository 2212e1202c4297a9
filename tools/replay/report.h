// What `kvtier replay` prints: a readable table (default) or one JSON object (--json), for one tier
// stack or for several policies side by side (--compare).
//
// JSON of one run (keys are stable; tests and the independent contract checker read them):
//   {"trace", "requests", "block_refs", "unique_blocks", "skipped_lines", "block_tokens",
//    "block_bytes", "input_tokens", "block_hits", "prefix_hits", "block_hit_ratio",
//    "prefix_hit_ratio", "block_miss_ratio", "prefix_miss_ratio", "prefill_tokens_saved",
//    "ttft": {"prefill_tokens_per_s", "read_gbps": [per tier], "total_saving_s",
//             "mean_saving_ms_per_request"},
//    "tiers": [{"name", "policy", "admission", "leaf_first", "capacity_blocks", "capacity_bytes",
//               "block_hits", "prefix_hits", "block_hit_ratio", "prefix_hit_ratio",
//               "prefill_tokens_saved", "promoted_blocks", "promoted_bytes", "demoted_blocks",
//               "demoted_bytes", "written_blocks", "written_bytes", "evictions", "rejected"}]}
// Ratios are over all block references of the trace. Per tier: "promoted" = copied from this tier
// into T0, "demoted" = victims of this tier written into the next one, "written" = new blocks
// admitted into this tier, "rejected" = offers its admission refused (for opt: blocks bypassed).
// Bytes are blocks x block_bytes (0 when the block size is unknown).
//
// With --compare the object holds the trace keys above once and "results": [one run each].
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/replay/simulator.h"
#include "tools/replay/sweep.h"

namespace kvtier::replay {

struct ReplayReport {
  std::string trace_path;
  uint32_t block_tokens = 0;
  uint64_t block_bytes = 0;
  uint64_t skipped_lines = 0;
  CostModel cost;
  SimResult result;
};

nlohmann::json ReportJson(const ReplayReport& report);
// One object: the trace keys of the first report and "results": [ReportJson of each].
nlohmann::json CompareJson(const std::vector<ReplayReport>& reports);

// Human-readable: a header line about the trace, one row per tier plus a total row, the bytes moved
// and the TTFT estimate.
std::string FormatReportTable(const ReplayReport& report);
// One row per report (policy), the same trace and tier capacities: ratios, tokens saved, TTFT.
std::string FormatCompareTable(const std::vector<ReplayReport>& reports);

// --sweep: {trace keys, "csv", "png", "points": [{policy, admission, capacity_blocks,
// capacity_fraction, block_hit_ratio, prefix_hit_ratio}]}; and a table, one row per capacity, one
// column of prefix miss ratios per policy.
nlohmann::json SweepJson(const std::vector<SweepPoint>& points, const Trace& trace,
                         const std::string& csv_path, const std::string& png_path);
std::string FormatSweepTable(const std::vector<SweepPoint>& points);

// "1,234,567".
std::string GroupDigits(uint64_t value);
// "1.5 GiB", "512 B".
std::string HumanBytes(uint64_t bytes);

}  // namespace kvtier::replay
