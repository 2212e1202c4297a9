// RoPE in config.json, and the inverse frequencies it implies. transformers 5 writes
//   "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, ...}
// and 4.x wrote "rope_theta" at the top level plus "rope_scaling": {"rope_type"|"type": ...} or
// null. Types "default" and "llama3" are supported; any other (linear, dynamic, yarn, longrope,
// per-layer-type parameters) is InvalidArgument naming the file and field.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/json_fields.h"
#include "engine/model_config.h"

namespace kvtier::engine {

absl::Status ReadRopeConfig(const JsonFields& fields, RopeConfig* rope);

// inv_freq [head_dim / 2]: the angle of pair i at position p is p * inv_freq[i]. Computed in double
// and rounded once (transformers computes in float32: they differ by an ulp or so, far below the
// golden tests' tolerance). Precondition: head_dim even and > 0; rope validated by ReadRopeConfig.
std::vector<float> RopeInvFreq(const RopeConfig& rope, uint32_t head_dim);

}  // namespace kvtier::engine
