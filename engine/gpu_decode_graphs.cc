#include "engine/gpu_decode_graphs.h"

namespace kvtier::engine {

int64_t GpuDecodeGraphs::Bucket(int64_t kv_len) {
  int64_t bucket = kMinBucket;
  while (bucket < kv_len) bucket *= 2;
  return bucket;
}

absl::Status GpuDecodeGraphs::Launch(const Key& key, const Bound& bound,
                                     const std::function<absl::Status()>& record,
                                     gpu::StreamHandle stream) {
  if (!(bound == bound_)) {
    graphs_.clear();
    bound_ = bound;
  }
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    KVTIER_ASSIGN_OR_RETURN(ops::gpu::Graph graph, ops::gpu::Graph::Capture(stream, record));
    it = graphs_.emplace(key, std::move(graph)).first;
  }
  return it->second.Launch(stream);
}

}  // namespace kvtier::engine
