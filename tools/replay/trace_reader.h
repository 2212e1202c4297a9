// Reading request traces: the Mooncake and the Alibaba Bailian formats (DESIGN.md "Trace replay"),
// one JSON object per line, from a file or stdin ("-"), plain, gzip or zstd (detected from the
// first bytes, not the file name).
//
//   Mooncake: {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [int, ...]}
//             512-token blocks.
//   Bailian:  {"chat_id": n, "parent_chat_id": n, "timestamp": seconds, "input_length": n,
//              "output_length": n, "type": "text", "turn": n, "hash_ids": [int, ...]}
//             16-token blocks. Timestamps are converted to milliseconds.
//
// A malformed line (bad JSON, a missing or mistyped field, a negative length, an empty line in the
// middle is skipped silently) stops loading with an InvalidArgument error whose message is
// "<file>:<line>: <what was wrong>" -- or, with skip_bad, is skipped and counted in
// Trace::skipped_lines.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "tools/replay/trace.h"

namespace kvtier::replay {

enum class TraceFormat { kAuto, kMooncake, kBailian };

// "auto", "mooncake", "bailian" -> the format; InvalidArgument otherwise.
absl::StatusOr<TraceFormat> ParseTraceFormat(const std::string& name);

struct TraceLoadOptions {
  // kAuto decides from the first non-empty line: "chat_id" present means Bailian.
  TraceFormat format = TraceFormat::kAuto;
  bool skip_bad = false;
  // Tokens per block; 0 means the format's default (512 Mooncake, 16 Bailian).
  uint32_t block_tokens = 0;
  // Called now and then with (bytes consumed, total bytes or 0 when unknown), for a progress bar.
  std::function<void(uint64_t, uint64_t)> on_progress;
};

// Reads the whole trace at `path` ("-" = stdin) into memory, interning hash ids into dense ids.
// NotFound / PermissionDenied name the file; InvalidArgument names file:line as above.
absl::StatusOr<Trace> LoadTrace(const std::string& path, const TraceLoadOptions& options);

}  // namespace kvtier::replay
