// What the GPU benchmarks share: dying with a message on a failed runtime call (a benchmark has no
// caller to return an error to), the best GPU-event time of a repeated measurement, and seeded
// random prompts.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gpu_runtime.h"

namespace kvtier::bench {

// Prints "<program>: <what>" to stderr and exits 1. `program` is the benchmark's name.
[[noreturn]] inline void Die(const char* program, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program, what.c_str());
  std::exit(1);
}
inline void Check(const char* program, const absl::Status& s, const char* what) {
  if (!s.ok()) Die(program, fmt::format("{}: {}", what, s.ToString()));
}
template <typename T>
T Take(const char* program, absl::StatusOr<T> v, const char* what) {
  Check(program, v.status(), what);
  return std::move(*v);
}

// `n` token ids drawn uniformly from [0, vocab) with `seed` (the same seed, the same prompt).
inline std::vector<int32_t> RandomIds(int64_t n, uint32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = dist(rng);
  return ids;
}

// Best GPU time in seconds of `enqueue` (work enqueued on `stream`) over `repeat` runs, after one
// warm-up run.
inline double BestSeconds(const char* program, int repeat, gpu::StreamHandle stream,
                          const std::function<void()>& enqueue) {
  gpu::Event start = Take(program, gpu::Event::Create(true), "event");
  gpu::Event end = Take(program, gpu::Event::Create(true), "event");
  double best = 1e30;
  for (int r = 0; r <= repeat; ++r) {
    Check(program, start.Record(stream), "record");
    enqueue();
    Check(program, end.Record(stream), "record");
    Check(program, end.Synchronize(), "sync");
    if (r > 0) {
      best = std::min(best, Take(program, gpu::Event::ElapsedMs(start, end), "elapsed") / 1e3);
    }
  }
  return best;
}

}  // namespace kvtier::bench
