// A request trace held in memory in compact form, ready for simulation. Produced by LoadTrace
// (trace_reader.h) from a Mooncake- or Bailian-format file; the original hash ids are interned into
// dense block ids so policies can index arrays by id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtier::replay {

struct Trace {
  // Dense block ids of every request's hash_ids, concatenated in file order. Id i is the i-th
  // distinct hash id seen in the file.
  std::vector<uint32_t> refs;
  // Request r references refs[request_begin[r], request_begin[r + 1]). Size: requests + 1.
  std::vector<uint64_t> request_begin = {0};
  // Per request: prompt tokens and arrival time in milliseconds from the trace's start.
  std::vector<uint32_t> input_tokens;
  std::vector<double> timestamp_ms;
  // Per dense id: the hash id it came from (used as the policies' ghost key).
  std::vector<uint64_t> hash_ids;
  // Tokens per block: 512 for Mooncake traces, 16 for Bailian, unless overridden.
  uint32_t block_tokens = 0;
  // Lines skipped as malformed (only with skip_bad).
  uint64_t skipped_lines = 0;

  size_t num_requests() const { return request_begin.size() - 1; }
  size_t num_refs() const { return refs.size(); }
  size_t num_blocks() const { return hash_ids.size(); }
};

}  // namespace kvtier::replay
