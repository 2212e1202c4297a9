// A stream's work recorded once and replayed as one launch (CUDA graphs; HIP graphs in the HIP
// build). The engine's decode step is some three hundred small kernels for one token; launched one
// by one their launch costs rival their run time, replayed from a graph they do not.
//
// What a replay does is exactly what was recorded: the same kernels with the same arguments, so
// every pointer and every host-side value (sizes, split counts) is frozen at capture. Inputs that
// change between replays must live in device memory that the recorded kernels read, written before
// each Launch (e.g. by CopyAsync on the same stream).
//
// Thread-safety: a Graph is used by one thread at a time. Capture uses thread-local mode: other
// threads' work on other streams is unaffected, but `stream` must not be used by another thread
// while it is capturing.
#pragma once

#include <functional>

#include "common/status.h"
#include "kernels/gpu_runtime.h"

namespace kvtier::ops::gpu {

class Graph {
 public:
  // Puts `stream` (an owned, non-default stream) in capture mode, calls `enqueue`, and turns what
  // it submitted to `stream` into an executable graph. Nothing runs. `enqueue` must only enqueue
  // work on `stream` (no synchronization, no allocation, no other stream). Its error, or the
  // vendor's (a call that cannot be captured), is returned and `stream` is left out of capture
  // mode. FailedPrecondition in the CPU-only build.
  static absl::StatusOr<Graph> Capture(::kvtier::gpu::StreamHandle stream,
                                       const std::function<absl::Status()>& enqueue);

  Graph() = default;
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  // Enqueues one replay on `stream` (any stream of the device it was captured on).
  absl::Status Launch(::kvtier::gpu::StreamHandle stream) const;

  bool valid() const { return exec_ != nullptr; }

 private:
  Graph(void* graph, void* exec) : graph_(graph), exec_(exec) {}
  void Reset();

  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

}  // namespace kvtier::ops::gpu
