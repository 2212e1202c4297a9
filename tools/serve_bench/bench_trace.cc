#include "tools/serve_bench/bench_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string_view>

#include "tools/common/input_stream.h"
#include "tools/replay/trace_line_parser.h"

namespace kvtier::serve_bench {
namespace {

constexpr uint32_t kMooncakeBlockTokens = 512;
constexpr uint32_t kBailianBlockTokens = 16;

bool IsBlank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

absl::Status Missing(std::string_view field) {
  return absl::InvalidArgumentError(fmt::format("field \"{}\" is missing", field));
}

// What the fields must mean together; the same rules as replay's reader (trace_reader.cc).
absl::Status CheckLine(const replay::TraceLine& line, uint32_t block_tokens) {
  if (!line.has_timestamp) return Missing("timestamp");
  if (!line.has_input_length) return Missing("input_length");
  if (!line.has_output_length) return Missing("output_length");
  if (!line.has_hash_ids) return Missing("hash_ids");
  constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
  if (line.input_length > kMax || line.output_length > kMax) {
    return absl::InvalidArgumentError(
        fmt::format("\"input_length\" {} or \"output_length\" {} is too large (at most {})",
                    line.input_length, line.output_length, kMax));
  }
  if (line.input_length == 0) return absl::InvalidArgumentError("\"input_length\" is 0");
  const uint64_t low = line.input_length / block_tokens;
  const uint64_t high = (line.input_length + block_tokens - 1) / block_tokens;
  const uint64_t n = line.hash_ids.size();
  if (n < low || n > high) {
    return absl::InvalidArgumentError(
        fmt::format("\"hash_ids\" has {} ids, but \"input_length\" {} at {} tokens per block "
                    "needs {}",
                    n, line.input_length, block_tokens,
                    low == high ? fmt::format("{}", low) : fmt::format("{} or {}", low, high)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchTrace> ReadBenchTrace(const std::string& path,
                                          const BenchTraceOptions& options) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader, LineReader::Open(path));
  replay::TraceLineParser parser;
  replay::TraceLine line;
  BenchTrace trace;
  std::string_view text;
  uint64_t line_number = 0;
  bool bailian = false;  // decided by the first line, as replay's --format auto does
  while ((options.max_requests == 0 || trace.requests.size() < options.max_requests) &&
         reader->Next(&text)) {
    ++line_number;
    if (text.empty() || (text.front() != '{' && IsBlank(text))) continue;
    absl::Status status = parser.Parse(text, &line);
    if (status.ok()) {
      if (trace.block_tokens == 0) {
        bailian = line.has_chat_id;
        trace.block_tokens = bailian ? kBailianBlockTokens : kMooncakeBlockTokens;
      }
      status = CheckLine(line, trace.block_tokens);
    }
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: {}", reader->name(), line_number, std::string(status.message())));
    }
    const double scale = bailian ? 1000.0 : 1.0;  // Bailian: seconds
    trace.requests.push_back({.line = line_number,
                              .timestamp_ms = line.timestamp * scale,
                              .input_length = static_cast<uint32_t>(line.input_length),
                              .output_length = static_cast<uint32_t>(line.output_length),
                              .hash_ids = line.hash_ids});
  }
  KVTIER_RETURN_IF_ERROR(reader->status());
  if (trace.block_tokens == 0) trace.block_tokens = kMooncakeBlockTokens;
  return trace;
}

}  // namespace kvtier::serve_bench
