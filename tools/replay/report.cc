#include "tools/replay/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace kvtier::replay {
namespace {

double Ratio(uint64_t part, uint64_t whole) { return whole ? double(part) / double(whole) : 0.0; }

double MeanSavingMs(const SimResult& r) {
  return r.requests ? r.ttft_saving_s * 1e3 / double(r.requests) : 0.0;
}

// Belady ignores leaf-first and admission filters, so its rows never claim them.
bool IsOpt(const TierConfig& tier) { return tier.eviction.policy == "opt"; }

std::string TierPolicy(const TierConfig& tier) {
  return tier.leaf_first && !IsOpt(tier) ? tier.eviction.policy + "+leaf" : tier.eviction.policy;
}

std::string TierAdmission(const TierConfig& tier) {
  return IsOpt(tier) ? "-" : tier.admission.policy;
}

// ", 3 malformed lines skipped" when --skip-bad dropped any, so a table never hides them.
std::string SkippedNote(uint64_t skipped_lines) {
  return skipped_lines == 0
             ? std::string()
             : fmt::format(", {} malformed lines skipped", GroupDigits(skipped_lines));
}

nlohmann::json TierJson(const TierConfig& tier, const TierCounters& c, uint64_t refs,
                        uint64_t block_bytes) {
  return {
      {"name", tier.name},
      {"policy", tier.eviction.policy},
      {"admission", tier.admission.policy},
      {"leaf_first", tier.leaf_first},
      {"capacity_blocks", tier.capacity_blocks},
      {"capacity_bytes", tier.capacity_blocks * block_bytes},
      {"block_hits", c.block_hits},
      {"prefix_hits", c.prefix_hits},
      {"block_hit_ratio", Ratio(c.block_hits, refs)},
      {"prefix_hit_ratio", Ratio(c.prefix_hits, refs)},
      {"prefill_tokens_saved", c.tokens_saved},
      {"promoted_blocks", c.promoted},
      {"promoted_bytes", c.promoted * block_bytes},
      {"demoted_blocks", c.demoted},
      {"demoted_bytes", c.demoted * block_bytes},
      {"written_blocks", c.written},
      {"written_bytes", c.written * block_bytes},
      {"evictions", c.evictions},
      {"rejected", c.rejected},
  };
}

nlohmann::json TraceJson(const ReplayReport& report) {
  const SimResult& r = report.result;
  return {
      {"trace", report.trace_path},
      {"requests", r.requests},
      {"block_refs", r.block_refs},
      {"unique_blocks", r.unique_blocks},
      {"skipped_lines", report.skipped_lines},
      {"block_tokens", report.block_tokens},
      {"block_bytes", report.block_bytes},
      {"input_tokens", r.input_tokens},
  };
}

std::vector<double> ReadGbps(const CostModel& cost, size_t tiers) {
  std::vector<double> gbps;
  for (size_t t = 0; t < tiers; ++t) gbps.push_back(cost.ReadBytesPerS(t) / 1e9);
  return gbps;
}

std::vector<double> ReadLatencyUs(const CostModel& cost, size_t tiers) {
  std::vector<double> us;
  for (size_t t = 0; t < tiers; ++t) {
    us.push_back(t < cost.read_latency_s.size() ? cost.read_latency_s[t] * 1e6 : 0.0);
  }
  return us;
}

std::string CostLine(const ReplayReport& report) {
  const SimResult& r = report.result;
  std::string gbps;
  for (size_t t = 0; t < r.tiers.size(); ++t) {
    gbps += fmt::format("{}{} {:g}", t ? ", " : "", r.tiers[t].name,
                        report.cost.ReadBytesPerS(t) / 1e9);
  }
  std::string latency;
  for (size_t t = 0; t < r.tiers.size() && t < report.cost.read_latency_s.size(); ++t) {
    if (report.cost.read_latency_s[t] == 0) continue;
    latency += fmt::format("{}{} {:g} us", latency.empty() ? "; latency per request " : ", ",
                           r.tiers[t].name, report.cost.read_latency_s[t] * 1e6);
  }
  std::string line = fmt::format(
      "estimated TTFT saving: {:.1f} s in total, {:.2f} ms per request (prefill {:g} tokens/s; "
      "read GB/s {}{})",
      r.ttft_saving_s, MeanSavingMs(r), report.cost.prefill_tokens_per_s, gbps, latency);
  if (report.block_bytes == 0)
    line += "\n  (block size unknown: read times not counted; give --model or --block-bytes)";
  return line;
}

}  // namespace

std::string GroupDigits(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = double(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

nlohmann::json ReportJson(const ReplayReport& report) {
  const SimResult& r = report.result;
  nlohmann::json j = TraceJson(report);
  j["block_hits"] = r.block_hits;
  j["prefix_hits"] = r.prefix_hits;
  j["block_hit_ratio"] = r.BlockHitRatio();
  j["prefix_hit_ratio"] = r.PrefixHitRatio();
  j["block_miss_ratio"] = 1.0 - r.BlockHitRatio();
  j["prefix_miss_ratio"] = 1.0 - r.PrefixHitRatio();
  j["prefill_tokens_saved"] = r.tokens_saved;
  j["ttft"] = {{"prefill_tokens_per_s", report.cost.prefill_tokens_per_s},
               {"read_gbps", ReadGbps(report.cost, r.tiers.size())},
               {"read_latency_us", ReadLatencyUs(report.cost, r.tiers.size())},
               {"total_saving_s", r.ttft_saving_s},
               {"mean_saving_ms_per_request", MeanSavingMs(r)}};
  nlohmann::json tiers = nlohmann::json::array();
  for (size_t t = 0; t < r.tiers.size(); ++t) {
    tiers.push_back(TierJson(r.tiers[t], r.counters[t], r.block_refs, report.block_bytes));
  }
  j["tiers"] = std::move(tiers);
  return j;
}

nlohmann::json CompareJson(const std::vector<ReplayReport>& reports) {
  nlohmann::json j = reports.empty() ? nlohmann::json::object() : TraceJson(reports.front());
  nlohmann::json results = nlohmann::json::array();
  for (const ReplayReport& report : reports) results.push_back(ReportJson(report));
  j["results"] = std::move(results);
  return j;
}

std::string FormatReportTable(const ReplayReport& report) {
  const SimResult& r = report.result;
  const uint64_t bb = report.block_bytes;
  std::string out = fmt::format(
      "trace {}: {} requests, {} block refs, {} unique blocks, {} tokens per block{}{}\n\n",
      report.trace_path, GroupDigits(r.requests), GroupDigits(r.block_refs),
      GroupDigits(r.unique_blocks), report.block_tokens,
      bb ? fmt::format(" ({} each)", HumanBytes(bb)) : std::string(),
      SkippedNote(report.skipped_lines));
  out += fmt::format("{:<6} {:<12} {:<9} {:>12} {:>8} {:>8} {:>15}  {:>11} {:>11} {:>11} {:>11}\n",
                     "tier", "policy", "admission", "capacity", "block", "prefix", "tokens saved",
                     "promoted", "demoted", "written", "evictions");
  for (size_t t = 0; t < r.tiers.size(); ++t) {
    const TierConfig& tier = r.tiers[t];
    const TierCounters& c = r.counters[t];
    out += fmt::format(
        "{:<6} {:<12} {:<9} {:>12} {:>8.4f} {:>8.4f} {:>15}  {:>11} {:>11} {:>11} {:>11}\n",
        tier.name, TierPolicy(tier), TierAdmission(tier), GroupDigits(tier.capacity_blocks),
        Ratio(c.block_hits, r.block_refs), Ratio(c.prefix_hits, r.block_refs),
        GroupDigits(c.tokens_saved), GroupDigits(c.promoted), GroupDigits(c.demoted),
        GroupDigits(c.written), GroupDigits(c.evictions));
    if (bb) {
      out += fmt::format("{:<6} {:<12} {:<9} {:>12} {:>8} {:>8} {:>15}  {:>11} {:>11} {:>11}\n", "",
                         "", "", HumanBytes(tier.capacity_blocks * bb), "", "", "",
                         HumanBytes(c.promoted * bb), HumanBytes(c.demoted * bb),
                         HumanBytes(c.written * bb));
    }
  }
  out += fmt::format("{:<6} {:<12} {:<9} {:>12} {:>8.4f} {:>8.4f} {:>15}\n\n", "total", "", "", "",
                     r.BlockHitRatio(), r.PrefixHitRatio(), GroupDigits(r.tokens_saved));
  out +=
      "block / prefix: hit ratios over all block references, by the highest tier holding the "
      "block\n";
  return out + CostLine(report) + "\n";
}

std::string FormatCompareTable(const std::vector<ReplayReport>& reports) {
  if (reports.empty()) return "";
  const SimResult& first = reports.front().result;
  std::string capacities;
  for (const TierConfig& tier : first.tiers) {
    capacities += fmt::format("{}{} {} blocks", capacities.empty() ? "" : ", ", tier.name,
                              GroupDigits(tier.capacity_blocks));
  }
  std::string out = fmt::format("trace {}: {} requests, {} block refs, {} unique blocks{}; {}\n\n",
                                reports.front().trace_path, GroupDigits(first.requests),
                                GroupDigits(first.block_refs), GroupDigits(first.unique_blocks),
                                SkippedNote(reports.front().skipped_lines), capacities);
  out += fmt::format("{:<14} {:<9} {:>10} {:>11} {:>12} {:>16} {:>15}\n", "policy", "admission",
                     "block hit", "prefix hit", "prefix miss", "tokens saved", "TTFT saved/req");
  for (const ReplayReport& report : reports) {
    const SimResult& r = report.result;
    out += fmt::format("{:<14} {:<9} {:>10.4f} {:>11.4f} {:>12.4f} {:>16} {:>12.2f} ms\n",
                       TierPolicy(r.tiers.front()), TierAdmission(r.tiers.front()),
                       r.BlockHitRatio(), r.PrefixHitRatio(), 1.0 - r.PrefixHitRatio(),
                       GroupDigits(r.tokens_saved), MeanSavingMs(r));
  }
  return out;
}

nlohmann::json SweepJson(const std::vector<SweepPoint>& points, const Trace& trace,
                         const std::string& csv_path, const std::string& png_path) {
  nlohmann::json j = {{"requests", trace.num_requests()},
                      {"block_refs", trace.num_refs()},
                      {"unique_blocks", trace.num_blocks()},
                      {"csv", csv_path},
                      {"png", png_path}};
  nlohmann::json rows = nlohmann::json::array();
  for (const SweepPoint& p : points) {
    rows.push_back({{"policy", p.policy},
                    {"admission", p.admission},
                    {"capacity_blocks", p.capacity_blocks},
                    {"capacity_fraction", p.capacity_fraction},
                    {"block_hit_ratio", p.block_hit_ratio},
                    {"prefix_hit_ratio", p.prefix_hit_ratio}});
  }
  j["points"] = std::move(rows);
  return j;
}

std::string FormatSweepTable(const std::vector<SweepPoint>& points) {
  std::vector<std::string> labels;
  std::vector<std::pair<uint64_t, double>> capacities;  // (blocks, fraction), first-seen order
  for (const SweepPoint& p : points) {
    const std::string label = SeriesLabel(p);
    if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
    if (std::none_of(capacities.begin(), capacities.end(),
                     [&](const auto& c) { return c.first == p.capacity_blocks; })) {
      capacities.emplace_back(p.capacity_blocks, p.capacity_fraction);
    }
  }
  std::string out = fmt::format("prefix miss ratio by capacity\n{:>12} {:>8}", "blocks", "of uniq");
  for (const std::string& label : labels) out += fmt::format(" {:>14}", label);
  out += "\n";
  for (const auto& [blocks, fraction] : capacities) {
    out += fmt::format("{:>12} {:>7.2f}%", GroupDigits(blocks), fraction * 100);
    for (const std::string& label : labels) {
      for (const SweepPoint& p : points) {
        if (SeriesLabel(p) == label && p.capacity_blocks == blocks)
          out += fmt::format(" {:>14.4f}", 1.0 - p.prefix_hit_ratio);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace kvtier::replay
