#include "engine/gpu_sampler.h"

#include "kernels/ops/gpu/ops_gpu.h"

namespace kvtier::engine {

absl::StatusOr<std::unique_ptr<GpuSampler>> GpuSampler::Create(int64_t vocab) {
  const int64_t workspace_bytes = ops::gpu::SampleWorkspaceBytes(vocab);
  KVTIER_ASSIGN_OR_RETURN(void* device, gpu::DeviceAlloc(sizeof(int32_t)));
  absl::StatusOr<void*> host = gpu::PinnedAlloc(sizeof(int32_t));
  absl::StatusOr<void*> workspace =
      host.ok() ? gpu::DeviceAlloc(static_cast<size_t>(workspace_bytes)) : host.status();
  if (!workspace.ok()) {
    (void)gpu::DeviceFree(device);
    if (host.ok()) (void)gpu::PinnedFree(*host);
    return workspace.status();
  }
  return std::unique_ptr<GpuSampler>(new GpuSampler(vocab, static_cast<int32_t*>(device),
                                                    static_cast<int32_t*>(*host), *workspace,
                                                    workspace_bytes));
}

GpuSampler::GpuSampler(int64_t vocab, int32_t* device_token, int32_t* host_token, void* workspace,
                       int64_t workspace_bytes)
    : vocab_(vocab),
      device_token_(device_token),
      host_token_(host_token),
      workspace_(workspace),
      workspace_bytes_(workspace_bytes) {}

GpuSampler::~GpuSampler() {
  (void)gpu::DeviceSynchronize();  // no enqueued choice still writes here
  (void)gpu::DeviceFree(workspace_);
  (void)gpu::PinnedFree(host_token_);
  (void)gpu::DeviceFree(device_token_);
}

absl::StatusOr<int32_t> GpuSampler::Choose(const float* logits, const ops::SamplingParams& params,
                                           uint64_t step, gpu::StreamHandle stream) {
  if (params.temperature <= 0) {
    KVTIER_RETURN_IF_ERROR(ops::gpu::Argmax(logits, 1, vocab_, device_token_, stream));
  } else {
    KVTIER_RETURN_IF_ERROR(ops::gpu::Sample(logits, vocab_, params, step, workspace_,
                                            workspace_bytes_, device_token_, stream));
  }
  KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(host_token_, device_token_, sizeof(int32_t), stream));
  KVTIER_ASSIGN_OR_RETURN(gpu::Event done, gpu::Event::Create());
  KVTIER_RETURN_IF_ERROR(done.Record(stream));
  KVTIER_RETURN_IF_ERROR(done.Synchronize());
  return *host_token_;
}

}  // namespace kvtier::engine
