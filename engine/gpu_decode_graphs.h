// The decode step recorded as graphs (kernels/ops/gpu/graph.h), one per (batch-size bucket,
// context bucket), replayed instead of launching its few hundred kernels one by one. The model
// keeps one set for a single sequence's decode and one for batched decode steps (whose padding
// to a batch-size bucket is gpu_decode_inputs.h's).
//
// A recording freezes host-side values, and the decode attention kernel splits the context by a
// host value (the longest context it must cover). So a step is recorded per bucket: the smallest
// power of two (at least kMinBucket) that covers the sequence's context; a bucket covers every
// length up to it, and the kernel reads the actual length from device memory. Each bucket is
// recorded the first time a step needs it, for the buffers it was recorded with (a recording holds
// their addresses: the KV pool's and the logits').
//
// Thread-safety: not thread-safe; one owner (the model).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>

#include "common/status.h"
#include "kernels/gpu_runtime.h"
#include "kernels/ops/gpu/graph.h"

namespace kvtier::engine {

class GpuDecodeGraphs {
 public:
  // Short contexts get buckets of their own: the attention kernel splits a bucket into pieces of at
  // least 64 keys and merges them in a second launch, which a context of 64 keys or fewer skips.
  static constexpr int64_t kMinBucket = 64;

  // The bucket of a step whose sequence holds kv_len tokens (this one included).
  static int64_t Bucket(int64_t kv_len);

  // The buffers outside the model's fixed scratch that a recording holds.
  struct Bound {
    const void* pool = nullptr;
    const void* logits = nullptr;
    const void* inputs = nullptr;     // a batched step's (GpuDecodeInputs::base)
    const void* workspace = nullptr;  // its attention workspace
    bool operator==(const Bound&) const = default;
  };

  // What a recording is for: `batch` rows (a bucket), contexts up to `context` (Bucket()).
  struct Key {
    int64_t batch = 1;
    int64_t context = 0;
    auto operator<=>(const Key&) const = default;
  };

  // Replays the recording for `key` on `stream`, recording it first with `record` (which enqueues
  // one decode step of key.batch rows covering key.context tokens on `stream`) if there is none.
  // Other `bound` buffers than before drop every recording.
  absl::Status Launch(const Key& key, const Bound& bound,
                      const std::function<absl::Status()>& record, gpu::StreamHandle stream);

  // Drops every recording (what they recorded has changed).
  void Clear() { graphs_.clear(); }

  size_t recorded() const { return graphs_.size(); }

 private:
  Bound bound_;
  std::map<Key, ops::gpu::Graph> graphs_;
};

}  // namespace kvtier::engine
