#include "tools/replay/trace_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>

#include "common/huge_pages.h"
#include "tools/common/input_stream.h"
#include "tools/replay/trace_interner.h"
#include "tools/replay/trace_line_parser.h"

namespace kvtier::replay {
namespace {

constexpr uint32_t kMooncakeBlockTokens = 512;
constexpr uint32_t kBailianBlockTokens = 16;
// Progress is reported every this many lines: often enough for a bar, rare enough to cost nothing.
constexpr uint64_t kProgressEveryLines = 8192;

bool IsBlank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

absl::Status Missing(std::string_view field) {
  return absl::InvalidArgumentError(fmt::format("field \"{}\" is missing", field));
}

// The meaning checks that need the format and block size. The id count must agree with the prompt
// length: the real traces hold ceil(input_length / block_tokens) ids (the last one covering a
// partial block); floor is accepted too, for writers that hash only full blocks. Anything else
// almost always means the wrong --format or --block-tokens, which would silently give meaningless
// hit ratios.
absl::Status CheckLine(const TraceLine& line, uint32_t block_tokens) {
  if (!line.has_timestamp) return Missing("timestamp");
  if (!line.has_input_length) return Missing("input_length");
  if (!line.has_hash_ids) return Missing("hash_ids");
  if (line.input_length > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(fmt::format("\"input_length\" {} is too large (at most {})",
                                                  line.input_length,
                                                  std::numeric_limits<uint32_t>::max()));
  }
  uint64_t low = line.input_length / block_tokens;
  uint64_t high = (line.input_length + block_tokens - 1) / block_tokens;
  uint64_t n = line.hash_ids.size();
  if (n < low || n > high) {
    std::string expected =
        low == high ? fmt::format("{}", low) : fmt::format("{} or {}", low, high);
    return absl::InvalidArgumentError(fmt::format(
        "\"hash_ids\" has {} ids, but \"input_length\" {} at {} tokens per block needs {} "
        "(wrong --format or --block-tokens?)",
        n, line.input_length, block_tokens, expected));
  }
  return absl::OkStatus();
}

uint32_t DefaultBlockTokens(TraceFormat format) {
  return format == TraceFormat::kBailian ? kBailianBlockTokens : kMooncakeBlockTokens;
}

// Builds a Trace line by line: decides the format, checks each line, interns hash ids.
class TraceBuilder {
 public:
  TraceBuilder(const TraceLoadOptions& options, LineReader* reader)
      : options_(options),
        reader_(reader),
        format_(options.format),
        expected_refs_(ExpectedRefs(*reader)),
        interner_(expected_refs_) {
    if (format_ != TraceFormat::kAuto) SetFormat(format_);
    // Generous: reserved pages that are never written cost no memory. Huge pages: a large trace
    // fills hundreds of MB here, and 4 KiB pages would cost a page fault every thousand refs.
    ReserveHuge(trace_.refs, expected_refs_ + expected_refs_ / 4);
    ReserveHuge(trace_.hash_ids, expected_refs_);
  }

  absl::StatusOr<Trace> Run() {
    std::string_view text;
    uint64_t line_number = 0;
    while (reader_->Next(&text)) {
      ++line_number;
      if (line_number % kProgressEveryLines == 0) ReportProgress();
      if (text.empty() || (text.front() != '{' && IsBlank(text))) continue;
      absl::Status status = AddLine(text);
      if (status.ok()) continue;
      if (!options_.skip_bad) {
        return absl::InvalidArgumentError(
            fmt::format("{}:{}: {}", reader_->name(), line_number, std::string(status.message())));
      }
      ++trace_.skipped_lines;
    }
    KVTIER_RETURN_IF_ERROR(reader_->status());
    ReportProgress();
    if (trace_.block_tokens == 0) SetFormat(TraceFormat::kMooncake);  // no valid line at all
    return std::move(trace_);
  }

 private:
  void SetFormat(TraceFormat format) {
    format_ = format;
    trace_.block_tokens =
        options_.block_tokens != 0 ? options_.block_tokens : DefaultBlockTokens(format);
  }

  // A guess for reserving, so that a large trace does not grow its way up: the real trace holds
  // about one reference per 10 bytes and a unique block per 16 (compressed files: ~4x more).
  static uint64_t ExpectedRefs(const LineReader& reader) {
    uint64_t bytes = reader.total_bytes();
    if (reader.compression() != Compression::kNone) bytes *= 4;
    return std::min<uint64_t>(bytes / 10, uint64_t{1} << 30);
  }

  absl::Status AddLine(std::string_view text) {
    KVTIER_RETURN_IF_ERROR(parser_.Parse(text, &line_));
    if (format_ == TraceFormat::kAuto) {
      SetFormat(line_.has_chat_id ? TraceFormat::kBailian : TraceFormat::kMooncake);
    }
    KVTIER_RETURN_IF_ERROR(CheckLine(line_, trace_.block_tokens));
    if (trace_.hash_ids.size() + line_.hash_ids.size() > std::numeric_limits<uint32_t>::max()) {
      return absl::ResourceExhaustedError("more than 2^32 distinct hash ids");
    }
    for (uint64_t hash : line_.hash_ids) interner_.Prefetch(hash);
    for (uint64_t hash : line_.hash_ids)
      trace_.refs.push_back(interner_.Intern(hash, &trace_.hash_ids));
    trace_.request_begin.push_back(trace_.refs.size());
    trace_.input_tokens.push_back(static_cast<uint32_t>(line_.input_length));
    double scale = format_ == TraceFormat::kBailian ? 1000.0 : 1.0;  // Bailian: seconds
    trace_.timestamp_ms.push_back(line_.timestamp * scale);
    return absl::OkStatus();
  }

  void ReportProgress() {
    if (options_.on_progress)
      options_.on_progress(reader_->bytes_consumed(), reader_->total_bytes());
  }

  const TraceLoadOptions& options_;
  LineReader* reader_;
  TraceFormat format_;
  TraceLineParser parser_;
  TraceLine line_;
  uint64_t expected_refs_;
  TraceInterner interner_;
  Trace trace_;
};

}  // namespace

absl::StatusOr<TraceFormat> ParseTraceFormat(const std::string& name) {
  if (name == "auto") return TraceFormat::kAuto;
  if (name == "mooncake") return TraceFormat::kMooncake;
  if (name == "bailian") return TraceFormat::kBailian;
  return absl::InvalidArgumentError(
      fmt::format("unknown trace format \"{}\" (expected auto, mooncake or bailian)", name));
}

absl::StatusOr<Trace> LoadTrace(const std::string& path, const TraceLoadOptions& options) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader, LineReader::Open(path));
  TraceBuilder builder(options, reader.get());
  return builder.Run();
}

}  // namespace kvtier::replay
