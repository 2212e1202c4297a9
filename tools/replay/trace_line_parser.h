// Syntax of one trace line: a JSON object whose known fields are extracted and type-checked. What
// the values must mean together (required fields, lengths that agree) is decided by the caller
// (trace_reader.cc), which knows the format and the block size.
//
// This is the only translation unit that includes simdjson.h (a very large header).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::replay {

// The fields of one line. A field that is absent keeps its has_ flag false.
struct TraceLine {
  bool has_timestamp = false;
  bool has_input_length = false;
  bool has_output_length = false;
  bool has_hash_ids = false;
  bool has_chat_id = false;  // Bailian's marker field
  double timestamp = 0;      // as written: milliseconds (Mooncake) or seconds (Bailian)
  uint64_t input_length = 0;
  uint64_t output_length = 0;
  std::vector<uint64_t> hash_ids;  // reused from line to line: no allocation once warm
};

class TraceLineParser {
 public:
  TraceLineParser();
  ~TraceLineParser();
  TraceLineParser(const TraceLineParser&) = delete;
  TraceLineParser& operator=(const TraceLineParser&) = delete;

  // Parses `line` into *out (reset first). At least 64 readable bytes must follow the end of `line`
  // in memory (LineReader guarantees it); they are not part of the line. On error returns
  // InvalidArgument whose message says what was wrong without a location, e.g.
  // `"input_length" must be a non-negative integer, got -3` or `not valid JSON (...)`.
  // Unknown fields are ignored; known ones are type-checked: timestamp a non-negative number;
  // input_length, output_length and every hash id a non-negative integer; chat_id, parent_chat_id
  // and turn integers; type a string.
  absl::Status Parse(std::string_view line, TraceLine* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::replay
