// The decode step recorded as graphs (kernels/ops/gpu/graph.h), one per context bucket, replayed
// instead of launching its few hundred kernels one by one.
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
    bool operator==(const Bound&) const = default;
  };

  // Replays the recording for `bucket` on `stream`, recording it first with `record` (which
  // enqueues one decode step covering `bucket` tokens on `stream`) if there is none. Other `bound`
  // buffers than before drop every recording.
  absl::Status Launch(int64_t bucket, const Bound& bound,
                      const std::function<absl::Status()>& record, gpu::StreamHandle stream);

  // Drops every recording (what they recorded has changed).
  void Clear() { graphs_.clear(); }

  size_t recorded() const { return graphs_.size(); }

 private:
  Bound bound_;
  std::map<int64_t, ops::gpu::Graph> graphs_;
};

}  // namespace kvtier::engine
