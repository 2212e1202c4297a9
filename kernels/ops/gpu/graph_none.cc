// CPU-only variant of kernels/ops/gpu/graph.h: there is no device to record for.
#include <utility>

#include "kernels/ops/gpu/graph.h"

namespace kvtier::ops::gpu {

absl::StatusOr<Graph> Graph::Capture(::kvtier::gpu::StreamHandle,
                                     const std::function<absl::Status()>&) {
  return absl::FailedPreconditionError("Graph::Capture: kvtier was built without a GPU backend");
}

Graph::Graph(Graph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
  graph_ = std::exchange(other.graph_, nullptr);
  exec_ = std::exchange(other.exec_, nullptr);
  return *this;
}

Graph::~Graph() = default;

void Graph::Reset() {}

absl::Status Graph::Launch(::kvtier::gpu::StreamHandle) const {
  return absl::FailedPreconditionError("Graph::Launch: kvtier was built without a GPU backend");
}

}  // namespace kvtier::ops::gpu
