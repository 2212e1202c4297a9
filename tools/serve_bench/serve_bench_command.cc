#include "tools/serve_bench/serve_bench_command.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/serve_bench/arrival_driver.h"
#include "tools/serve_bench/bench_report.h"
#include "tools/serve_bench/bench_trace.h"
#include "tools/serve_bench/metrics_scrape.h"
#include "tools/serve_bench/synthetic_prompt.h"

namespace kvtier::serve_bench {
namespace {

using Json = nlohmann::json;

struct Flags {
  std::string trace;
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string model;        // "": the one /v1/models lists
  uint32_t vocab_size = 0;  // 0: /v1/models' vocab_size
  uint64_t max_requests = 0;
  double duration_s = 0;
  double time_scale = 1;
  uint32_t sample_conversations = 1;  // keep 1 in N conversations
  uint32_t block_tokens = 0;          // 0: the trace's
  int64_t max_prompt_tokens = 0, max_output_tokens = 0;
  int max_in_flight = 0;
  uint64_t seed = 0;
  int read_timeout_s = 600;
  int progress_s = 10;
  bool json = false;
  std::string requests_out;  // "": none
};

void AddFlags(CLI::App* cmd, Flags* f) {
  cmd->add_option("--trace", f->trace,
                  "Mooncake or Bailian trace (JSONL, gzip/zstd), or - for stdin")
      ->required();
  cmd->add_option("--host", f->host, "The server's address")->capture_default_str();
  cmd->add_option("--port", f->port, "The server's port")->capture_default_str();
  cmd->add_option("--model", f->model, "Model name to request (default: the one /v1/models lists)");
  cmd->add_option("--vocab-size", f->vocab_size,
                  "Token ids are drawn below this (default: /v1/models' vocab_size)")
      ->check(CLI::Range(1u, 1u << 30));
  cmd->add_option("--max-requests", f->max_requests, "Replay only the first N records (0: all)");
  cmd->add_option("--duration", f->duration_s,
                  "Replay only the records arriving in the first S seconds, after --time-scale "
                  "(0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--time-scale", f->time_scale,
                  "Multiply the trace's arrival times by this (0.1: ten times faster; 0: all at "
                  "once)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--sample-conversations", f->sample_conversations,
                  "Keep 1 in N conversations, whole, at their arrival times: a request belongs to "
                  "the conversation of its second hash id (the first is the trace's shared system "
                  "prompt; a later turn starts with the earlier ones). Thins the load a long "
                  "window of the trace offers while keeping its reuse")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  cmd->add_option("--block-tokens", f->block_tokens,
                  "Prompt tokens per hash id (default: the trace's, 512 for Mooncake); prompt "
                  "lengths scale with it")
      ->check(CLI::Range(1u, 1u << 16));
  cmd->add_option("--max-prompt-tokens", f->max_prompt_tokens, "Cut longer prompts (0: no cap)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-output-tokens", f->max_output_tokens,
                  "Cap each request's max_tokens (the trace's output length; 0: no cap)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-in-flight", f->max_in_flight,
                  "Requests in flight at most; one due beyond waits (0: open loop)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", f->seed, "Seed of the token ids derived from hash ids")
      ->capture_default_str();
  cmd->add_option("--read-timeout", f->read_timeout_s,
                  "Seconds without a byte before a request counts as timed out (and the most a "
                  "GET of /v1/models or /metrics may take)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--progress", f->progress_s, "Seconds between progress lines on stderr (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print one JSON object instead of a table");
  cmd->add_option("--requests-out", f->requests_out,
                  "Also write one JSON object per request (JSONL) to this file");
}

// What /v1/models says about the served model.
struct ServedModel {
  std::string name;
  int64_t max_model_len = 0;
  uint32_t vocab_size = 0;  // 0: not reported
};

absl::StatusOr<ServedModel> QueryModel(const tcp::endpoint& server, const Flags& f) {
  KVTIER_ASSIGN_OR_RETURN(std::string body,
                          HttpGet(server, "/v1/models", std::chrono::seconds(f.read_timeout_s)));
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) {
    return absl::UnavailableError("GET /v1/models: no model listed");
  }
  const Json* entry = &j["data"][0];
  for (const Json& m : j["data"]) {
    if (m.is_object() && m.value("id", "") == f.model) entry = &m;
  }
  ServedModel m;
  m.name = f.model.empty() ? entry->value("id", "") : f.model;
  m.max_model_len = entry->value("max_model_len", int64_t{0});
  m.vocab_size = entry->value("vocab_size", uint32_t{0});
  if (f.vocab_size > 0) m.vocab_size = f.vocab_size;
  if (m.vocab_size == 0) {
    return absl::InvalidArgumentError(
        "the server's /v1/models does not report vocab_size: pass --vocab-size (the model's "
        "config.json vocab_size)");
  }
  return m;
}

// Written by hand rather than through a JSON tree: it is made on the driver's one thread while
// other streams are being timed, and a 100K-token prompt as a tree costs milliseconds.
std::string Body(const ServedModel& model, const TraceRequest& request, const PromptShape& shape,
                 const PromptOptions& options) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), R"({{"model":{},"prompt":[)",
                 Json(model.name).dump(-1, ' ', false, Json::error_handler_t::replace));
  const std::vector<int32_t> tokens = PromptTokens(request, shape.length, options);
  for (size_t i = 0; i < tokens.size(); ++i)
    fmt::format_to(std::back_inserter(out), "{}{}", i == 0 ? "" : ",", tokens[i]);
  fmt::format_to(std::back_inserter(out),
                 R"(],"max_tokens":{},"temperature":0,"ignore_eos":true,"stream":true,)"
                 R"("stream_options":{{"include_usage":true}}}})",
                 shape.max_tokens);
  return fmt::to_string(out);
}

std::optional<MetricSeries> Scrape(const tcp::endpoint& server, std::chrono::seconds timeout,
                                   std::string* error) {
  absl::StatusOr<std::string> text = HttpGet(server, "/metrics", timeout);
  if (!text.ok()) {
    *error = std::string(text.status().message());
    return std::nullopt;
  }
  return ParseMetrics(*text, "kvtier_serve_");
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(fmt::format("--requests-out {}: cannot write", path));
  return absl::OkStatus();
}

// Every request is a connection: a run with thousands in flight needs more descriptors than the
// usual soft limit of 1024. Raised to the hard limit; if that is not enough, the requests that
// cannot connect are counted as "connect" errors.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// What will be sent: the records due within --duration, their arrival times (scaled, from the
// earliest record), prompt shapes and what the report needs of each.
struct Plan {
  std::vector<TraceRequest> requests;
  std::vector<double> arrivals_s;
  std::vector<PromptShape> shapes;
  std::vector<SentRequest> sent;
};

// Whether --sample-conversations keeps `r`: a fixed mix of its conversation's id (the second hash
// id, or the only one), the same in every run and on every machine.
bool KeptBySample(const TraceRequest& r, uint32_t one_in) {
  if (one_in <= 1 || r.hash_ids.empty()) return true;
  uint64_t x = r.hash_ids[std::min<size_t>(1, r.hash_ids.size() - 1)] + 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;  // splitmix64's finalizer
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return (x ^ (x >> 31)) % one_in == 0;
}

Plan MakePlan(BenchTrace trace, const Flags& f, const PromptOptions& options) {
  Plan p;
  double first = std::numeric_limits<double>::infinity();
  for (const TraceRequest& r : trace.requests) first = std::min(first, r.timestamp_ms);
  for (TraceRequest& r : trace.requests) {
    if (!KeptBySample(r, f.sample_conversations)) continue;
    const double at = (r.timestamp_ms - first) / 1000 * f.time_scale;
    if (f.duration_s > 0 && at > f.duration_s) continue;
    p.arrivals_s.push_back(at);
    p.shapes.push_back(ShapeOf(r, options));
    p.requests.push_back(std::move(r));
  }
  const std::vector<int64_t> ideal = IdealCachedTokens(p.requests, p.shapes, options.block_tokens);
  for (size_t i = 0; i < p.requests.size(); ++i) {
    p.sent.push_back({.line = p.requests[i].line,
                      .at_s = p.arrivals_s[i],
                      .prompt_tokens = p.shapes[i].length,
                      .max_tokens = p.shapes[i].max_tokens,
                      .truncated = p.shapes[i].truncated(),
                      .ideal_cached_tokens = ideal[i]});
  }
  return p;
}

DriverOptions MakeDriverOptions(const Flags& f, size_t requests) {
  DriverOptions driver;
  driver.max_in_flight = f.max_in_flight;
  driver.read_timeout = std::chrono::seconds(f.read_timeout_s);
  if (f.progress_s > 0) {
    driver.progress_every = std::chrono::seconds(f.progress_s);
    driver.on_progress = [requests](size_t ended, size_t in_flight, size_t errors) {
      std::fprintf(stderr, "kvtier serve-bench: %zu/%zu ended, %zu in flight, %zu failed\n", ended,
                   requests, in_flight, errors);
    };
  }
  return driver;
}

RunInfo MakeRunInfo(const Flags& f, const ServedModel& model, const PromptOptions& options,
                    const Plan& plan) {
  const auto& a = plan.arrivals_s;
  return {.trace = f.trace,
          .server = fmt::format("{}:{}", f.host, f.port),
          .model = model.name,
          .max_model_len = model.max_model_len,
          .trace_block_tokens = options.trace_block_tokens,
          .block_tokens = options.block_tokens,
          .time_scale = f.time_scale,
          .max_in_flight = f.max_in_flight,
          .schedule_span_s = a.empty() ? 0 : *std::max_element(a.begin(), a.end())};
}

absl::StatusOr<int> Bench(const Flags& f) {
  KVTIER_ASSIGN_OR_RETURN(BenchTrace trace,
                          ReadBenchTrace(f.trace, {.max_requests = f.max_requests}));
  KVTIER_ASSIGN_OR_RETURN(tcp::endpoint server, Resolve(f.host, f.port));
  KVTIER_ASSIGN_OR_RETURN(ServedModel model, QueryModel(server, f));
  const PromptOptions options{
      .trace_block_tokens = trace.block_tokens,
      .block_tokens = f.block_tokens > 0 ? f.block_tokens : trace.block_tokens,
      .vocab_size = model.vocab_size,
      .seed = f.seed,
      .max_prompt_tokens = f.max_prompt_tokens,
      .max_output_tokens = f.max_output_tokens,
      .max_model_len = model.max_model_len};
  const Plan plan = MakePlan(std::move(trace), f, options);
  RaiseDescriptorLimit();
  std::string metrics_error;
  const std::optional<MetricSeries> before =
      Scrape(server, std::chrono::seconds(f.read_timeout_s), &metrics_error);
  const DriverResult result = RunSchedule(
      server, plan.arrivals_s,
      [&](size_t i) { return Body(model, plan.requests[i], plan.shapes[i], options); },
      MakeDriverOptions(f, plan.requests.size()));
  BenchReport report = BuildReport(MakeRunInfo(f, model, options, plan), plan.sent, result);
  const std::optional<MetricSeries> after =
      Scrape(server, std::chrono::seconds(f.read_timeout_s), &metrics_error);
  if (before.has_value() && after.has_value()) report.metrics_delta = Delta(*before, *after);
  report.metrics_error = metrics_error;
  const std::string out =
      f.json
          ? ToJson(report).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                "\n"
          : FormatTable(report);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  // After the report: a file that cannot be written loses nothing else.
  if (!f.requests_out.empty())
    KVTIER_RETURN_IF_ERROR(WriteFile(f.requests_out, RequestLines(plan.sent, result)));
  return report.ok == report.requests ? 0 : 3;
}

}  // namespace

void RegisterServeBenchCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "serve-bench",
      "Replay a request trace against a running `kvtier serve` at its arrival times: TTFT, "
      "inter-token latency, throughput, prompt tokens cached vs computed");
  auto flags = std::make_shared<Flags>();
  AddFlags(cmd, flags.get());
  cmd->callback([flags, exit_code] {
    absl::StatusOr<int> code = Bench(*flags);
    if (!code.ok()) {
      std::fprintf(stderr, "kvtier serve-bench: %s\n",
                   std::string(code.status().message()).c_str());
      *exit_code = 1;
      return;
    }
    *exit_code = *code;
  });
}

}  // namespace kvtier::serve_bench
