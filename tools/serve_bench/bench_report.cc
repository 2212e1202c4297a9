#include "tools/serve_bench/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvtier::serve_bench {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kErrorsShown = 5;
constexpr const char* kPromptFamily = "kvtier_serve_prompt_tokens_total";

double Share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

void AddErrors(const std::vector<SentRequest>& sent, const DriverResult& result, BenchReport* r) {
  for (size_t i = 0; i < result.results.size(); ++i) {
    const StreamResult& s = result.results[i];
    if (s.ok()) continue;
    ++r->errors[s.error_kind];
    if (r->first_errors.size() < kErrorsShown) {
      r->first_errors.push_back(fmt::format("request {} (trace line {}): {}: {}", i, sent[i].line,
                                            s.error_kind, s.error));
    }
  }
}

// The latency samples of the requests that succeeded.
void AddLatencies(const DriverResult& result, BenchReport* r) {
  std::vector<double> ttft, itl, tpot, latency;
  for (const StreamResult& s : result.results) {
    if (!s.ok()) continue;
    if (s.ttft_s >= 0) ttft.push_back(s.ttft_s);
    itl.insert(itl.end(), s.gaps_s.begin(), s.gaps_s.end());
    if (s.completion_tokens > 1 && s.ttft_s >= 0) {
      tpot.push_back((s.latency_s - s.ttft_s) / static_cast<double>(s.completion_tokens - 1));
    }
    latency.push_back(s.latency_s);
  }
  r->ttft_s = Summarize(std::move(ttft));
  r->itl_s = Summarize(std::move(itl));
  r->tpot_s = Summarize(std::move(tpot));
  r->latency_s = Summarize(std::move(latency));
  r->send_lag_s = Summarize(result.send_lag_s);
}

std::string Row(const char* name, const Percentiles& p, double unit) {
  if (p.n == 0) return fmt::format("  {:<12} (no samples)\n", name);
  return fmt::format("  {:<12} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f}   ({} samples)\n", name,
                     p.mean * unit, p.p50 * unit, p.p90 * unit, p.p99 * unit, p.max * unit, p.n);
}

std::string RequestsLine(const BenchReport& r) {
  std::string failed;
  for (const auto& [kind, n] : r.errors)
    failed += fmt::format("{}{}: {}", failed.empty() ? "" : ", ", kind, n);
  return fmt::format(
      "requests    {} sent, {} ok, {} failed{}; {} prompts cut to the context or "
      "--max-prompt-tokens\n",
      r.requests, r.ok, r.requests - r.ok, failed.empty() ? "" : " (" + failed + ")", r.truncated);
}

// The prompt tokens the server counted over the run, all sources together.
int64_t ServerPromptTokens(const MetricSeries& delta) {
  int64_t total = 0;
  for (const auto& [source, v] : ByLabel(delta, kPromptFamily, "source")) total += std::llround(v);
  return total;
}

std::string MetricsLines(const BenchReport& r) {
  if (!r.metrics_delta.has_value())
    return fmt::format("server      /metrics unavailable: {}\n", r.metrics_error);
  const MetricSeries& d = *r.metrics_delta;
  std::string sources, outcomes;
  const int64_t total = ServerPromptTokens(d);
  for (const auto& [source, v] : ByLabel(d, kPromptFamily, "source")) {
    sources += fmt::format("{}{} {:.0f} ({:.1f}%)", sources.empty() ? "" : ", ", source, v,
                           100 * Share(std::llround(v), total));
  }
  // Both count the requests that left the engine in the run; they differ when someone else used
  // the server meanwhile, or a request failed after it was admitted.
  if (total != r.prompt_tokens) {
    sources += fmt::format(" -- {} in all, not the {} of the succeeded requests' usage", total,
                           r.prompt_tokens);
  }
  for (const auto& [outcome, v] : ByLabel(d, "kvtier_serve_requests_total", "outcome")) {
    if (v != 0) outcomes += fmt::format("{}{} {:.0f}", outcomes.empty() ? "" : ", ", outcome, v);
  }
  const double count = Value(d, "kvtier_serve_time_to_first_token_seconds_count", 0);
  const double sum = Value(d, "kvtier_serve_time_to_first_token_seconds_sum", 0);
  return fmt::format(
      "server      prompt tokens by source: {}\n"
      "            generated {:.0f}, preemptions {:.0f}, requests: {}; TTFT mean {:.1f} ms "
      "(server-side)\n",
      sources.empty() ? "(no kvtier_serve_prompt_tokens_total series)" : sources,
      Value(d, "kvtier_serve_generation_tokens_total", 0),
      Value(d, "kvtier_serve_preemptions_total", 0), outcomes.empty() ? "none" : outcomes,
      count > 0 ? 1000 * sum / count : 0.0);
}

Json PercentilesJson(const Percentiles& p) {
  return {{"n", p.n},     {"mean", p.mean}, {"p50", p.p50},
          {"p90", p.p90}, {"p99", p.p99},   {"max", p.max}};
}

}  // namespace

Percentiles Summarize(std::vector<double> samples) {
  Percentiles p;
  p.n = samples.size();
  if (samples.empty()) return p;
  std::sort(samples.begin(), samples.end());
  const auto rank = [&](double q) {
    const size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(samples.size())));
    return samples[std::clamp<size_t>(k, 1, samples.size()) - 1];
  };
  p.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(p.n);
  p.p50 = rank(0.5);
  p.p90 = rank(0.9);
  p.p99 = rank(0.99);
  p.max = samples.back();
  return p;
}

BenchReport BuildReport(const RunInfo& info, const std::vector<SentRequest>& sent,
                        const DriverResult& result) {
  BenchReport r;
  r.info = info;
  r.requests = result.results.size();
  r.wall_s = result.wall_s;
  for (size_t i = 0; i < r.requests; ++i) {
    const StreamResult& s = result.results[i];
    if (sent[i].truncated) ++r.truncated;
    if (!s.ok()) continue;
    ++r.ok;
    r.prompt_tokens += s.prompt_tokens;
    r.cached_tokens += s.cached_tokens;
    r.completion_tokens += s.completion_tokens;
    r.ideal_cached_tokens += sent[i].ideal_cached_tokens;
  }
  AddErrors(sent, result, &r);
  AddLatencies(result, &r);
  return r;
}

std::string FormatTable(const BenchReport& r) {
  const RunInfo& i = r.info;
  std::string out = fmt::format(
      "kvtier serve-bench: {} requests of {} against {} at {} (context {})\n"
      "schedule    time scale {}, last arrival at {:.1f} s, {}; {} tokens per hash id (trace: "
      "{})\n",
      r.requests, i.trace, i.model, i.server, i.max_model_len, i.time_scale, i.schedule_span_s,
      i.max_in_flight > 0 ? fmt::format("at most {} in flight", i.max_in_flight)
                          : std::string("open loop"),
      i.block_tokens, i.trace_block_tokens);
  out += RequestsLine(r);
  const double wall = r.wall_s > 0 ? r.wall_s : 1;
  out += fmt::format(
      "throughput  {:.1f} s wall: {:.2f} requests/s, {:.1f} output tokens/s, {:.1f} "
      "prompt tokens/s (succeeded requests)\n",
      r.wall_s, static_cast<double>(r.ok) / wall, static_cast<double>(r.completion_tokens) / wall,
      static_cast<double>(r.prompt_tokens) / wall);
  out += fmt::format("latency ms   {:>9} {:>9} {:>9} {:>9} {:>9}\n", "mean", "p50", "p90", "p99",
                     "max");
  out += Row("TTFT", r.ttft_s, 1000) + Row("inter-token", r.itl_s, 1000) +
         Row("per token", r.tpot_s, 1000) + Row("end to end", r.latency_s, 1000) +
         Row("send lag", r.send_lag_s, 1000);
  out += fmt::format(
      "prompt      {} tokens: {} cached ({:.1f}%), {} computed (usage.cached_tokens); an infinite "
      "cache, cold at the start: {} ({:.1f}%)\n",
      r.prompt_tokens, r.cached_tokens, 100 * Share(r.cached_tokens, r.prompt_tokens),
      r.prompt_tokens - r.cached_tokens, r.ideal_cached_tokens,
      100 * Share(r.ideal_cached_tokens, r.prompt_tokens));
  out += MetricsLines(r);
  for (const std::string& e : r.first_errors) out += "error       " + e + "\n";
  return out;
}

Json ToJson(const BenchReport& r) {
  const RunInfo& i = r.info;
  Json j = {{"trace", i.trace},
            {"server", i.server},
            {"model", i.model},
            {"max_model_len", i.max_model_len},
            {"trace_block_tokens", i.trace_block_tokens},
            {"block_tokens", i.block_tokens},
            {"time_scale", i.time_scale},
            {"max_in_flight", i.max_in_flight},
            {"schedule_span_s", i.schedule_span_s}};
  j["requests"] = r.requests;
  j["ok"] = r.ok;
  j["failed"] = r.requests - r.ok;
  j["errors"] = r.errors;
  j["first_errors"] = r.first_errors;
  j["truncated"] = r.truncated;
  j["wall_s"] = r.wall_s;
  const double wall = r.wall_s > 0 ? r.wall_s : 1;
  j["requests_per_s"] = static_cast<double>(r.ok) / wall;
  j["output_tokens_per_s"] = static_cast<double>(r.completion_tokens) / wall;
  j["ttft_s"] = PercentilesJson(r.ttft_s);
  j["inter_token_s"] = PercentilesJson(r.itl_s);
  j["time_per_output_token_s"] = PercentilesJson(r.tpot_s);
  j["latency_s"] = PercentilesJson(r.latency_s);
  j["send_lag_s"] = PercentilesJson(r.send_lag_s);
  j["prompt_tokens"] = r.prompt_tokens;
  j["cached_tokens"] = r.cached_tokens;
  j["computed_tokens"] = r.prompt_tokens - r.cached_tokens;
  j["ideal_cached_tokens"] = r.ideal_cached_tokens;
  j["completion_tokens"] = r.completion_tokens;
  if (r.metrics_delta.has_value()) {
    j["metrics"] = {{"prompt_tokens", ServerPromptTokens(*r.metrics_delta)},
                    {"prompt_tokens_by_source", ByLabel(*r.metrics_delta, kPromptFamily, "source")},
                    {"series", *r.metrics_delta}};
  } else {
    j["metrics"] = nullptr;
    j["metrics_error"] = r.metrics_error;
  }
  return j;
}

std::string RequestLines(const std::vector<SentRequest>& sent, const DriverResult& result) {
  std::string out;
  for (size_t i = 0; i < sent.size(); ++i) {
    const SentRequest& q = sent[i];
    const StreamResult& s = result.results[i];
    Json from = Json::object();
    for (size_t k = 0; k < engine::kCacheSources; ++k) {
      from[engine::kCacheSourceNames[k]] = s.cached_from[k];
    }
    Json j = {{"index", i},
              {"line", q.line},
              {"at_s", q.at_s},
              {"send_lag_s", result.send_lag_s[i]},
              {"prompt_tokens", q.prompt_tokens},
              {"max_tokens", q.max_tokens},
              {"truncated", q.truncated},
              {"ideal_cached_tokens", q.ideal_cached_tokens},
              {"http_status", s.http_status},
              {"error_kind", s.error_kind},
              {"error", s.error},
              {"ttft_s", s.ttft_s >= 0 ? Json(s.ttft_s) : Json(nullptr)},
              {"latency_s", s.latency_s},
              {"completion_tokens", s.completion_tokens},
              {"cached_tokens", s.cached_tokens},
              {"cached_from", std::move(from)},
              {"preemptions", s.preemptions >= 0 ? Json(s.preemptions) : Json(nullptr)},
              {"finish_reason", s.finish_reason}};
    out += j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  return out;
}

}  // namespace kvtier::serve_bench
