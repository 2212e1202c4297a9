// Writing a generated workload as a Mooncake-format trace file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "tools/synth/synth.h"

namespace kvtier::synth {

// Generates config.requests requests and writes them, one JSON line each, to `path`: "-" is stdout,
// a name ending in ".gz" or ".zst" is gzip- or zstd-compressed. `config` must be valid.
// `on_progress`, if set, is called now and then with (requests written, config.requests).
// Errors (cannot create, write failed) name the path.
absl::Status WriteSynthTrace(const SynthConfig& config, const std::string& path,
                             const std::function<void(uint64_t, uint64_t)>& on_progress = nullptr);

}  // namespace kvtier::synth
