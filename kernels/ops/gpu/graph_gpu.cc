// GPU variant of kernels/ops/gpu/graph.h over the vendor's graph API.
#include <utility>

#include "kernels/gpu_vendor.h"
#include "kernels/launch_status.h"
#include "kernels/ops/gpu/graph.h"

// The graph API's HIP names. TODO(lead): these belong in kernels/gpu_vendor.h with the others;
// they are here because that file is outside this change.
#if defined(KVTIER_GPU_HIP)
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaGraphInstantiate hipGraphInstantiate
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphDestroy hipGraphDestroy
#endif

namespace kvtier::ops::gpu {
namespace {

absl::Status Check(cudaError_t err, const char* what) {
  return ::kvtier::gpu::StatusFromVendorCode(static_cast<int>(err), what);
}

cudaStream_t AsStream(::kvtier::gpu::StreamHandle s) { return static_cast<cudaStream_t>(s); }

// cudaGraphInstantiate's signature differs between CUDA 12 (flags) and HIP (error node, log).
cudaError_t Instantiate(cudaGraphExec_t* exec, cudaGraph_t graph) {
#if defined(KVTIER_GPU_HIP)
  return hipGraphInstantiate(exec, graph, nullptr, nullptr, 0);
#else
  return cudaGraphInstantiate(exec, graph, 0);
#endif
}

}  // namespace

absl::StatusOr<Graph> Graph::Capture(::kvtier::gpu::StreamHandle stream,
                                     const std::function<absl::Status()>& enqueue) {
  if (stream == nullptr) {
    return absl::InvalidArgumentError(
        "Graph::Capture: the legacy default stream cannot be captured");
  }
  KVTIER_RETURN_IF_ERROR(
      Check(cudaStreamBeginCapture(AsStream(stream), cudaStreamCaptureModeThreadLocal),
            "cudaStreamBeginCapture"));
  const absl::Status enqueued = enqueue();
  cudaGraph_t graph = nullptr;
  // Always end the capture, so the stream is usable whatever happened.
  const cudaError_t ended = cudaStreamEndCapture(AsStream(stream), &graph);
  if (!enqueued.ok() || ended != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    if (!enqueued.ok()) return enqueued;
    return Check(ended, "cudaStreamEndCapture (a call in the captured work cannot be captured)");
  }
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t made = Instantiate(&exec, graph); made != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    return Check(made, "cudaGraphInstantiate");
  }
  return Graph(graph, exec);
}

Graph::Graph(Graph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    Reset();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

Graph::~Graph() { Reset(); }

void Graph::Reset() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  graph_ = exec_ = nullptr;
}

absl::Status Graph::Launch(::kvtier::gpu::StreamHandle stream) const {
  if (exec_ == nullptr) return absl::FailedPreconditionError("Graph::Launch: an empty graph");
  return Check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), AsStream(stream)),
               "cudaGraphLaunch");
}

}  // namespace kvtier::ops::gpu
