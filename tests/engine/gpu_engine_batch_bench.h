// kvtier_engine_bench's batched decode (gpu_engine_batch_bench.cc): the real engine loop
// (LlmEngine over GpuBackend, the path `kvtier serve` runs) at several batch sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/gpu_model.h"

namespace kvtier::engine_bench {

struct BatchDecodeFlags {
  std::vector<int64_t> batches;  // requests decoding together
  int64_t prompt_tokens = 32;    // each request's prompt (random ids)
  int new_tokens = 128;          // greedy tokens each request generates (no eos stop)
};

// For each batch size and each decode path (batch graphs on, off): a warm-up run, then a measured
// run of `batch` requests added at once. Prints one JSON line each: tokens/s over the whole run
// (prefill + decode, as transformers' generate is timed) and over the decode steps alone, ms per
// decode step, and the ceiling — batch / (the step's weight bytes / copy_gbps), every weight read
// once a step — beside them. Dies (bench::Die) on an engine error.
void DecodeBatches(engine::GpuModel& model, const BatchDecodeFlags& flags, double copy_gbps);

}  // namespace kvtier::engine_bench
