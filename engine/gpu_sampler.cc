#include "engine/gpu_sampler.h"

#include <algorithm>

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
  (void)gpu::DeviceFree(rows_workspace_);
  (void)gpu::DeviceFree(device_rows_);
  (void)gpu::PinnedFree(host_ids_);
  (void)gpu::PinnedFree(host_rows_);
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

namespace kvtier::engine {

absl::Status GpuSampler::EnsureRows(int64_t rows) {
  if (rows <= rows_capacity_) return absl::OkStatus();
  const int64_t grown = std::max<int64_t>(rows, 2 * rows_capacity_);
  // Every ChooseRows waited for its work: nothing enqueued reads the old buffers.
  KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(rows_workspace_));
  KVTIER_RETURN_IF_ERROR(gpu::DeviceFree(device_rows_));
  KVTIER_RETURN_IF_ERROR(gpu::PinnedFree(host_ids_));
  KVTIER_RETURN_IF_ERROR(gpu::PinnedFree(host_rows_));
  rows_workspace_ = device_rows_ = nullptr;
  host_rows_ = nullptr;
  host_ids_ = nullptr;
  rows_capacity_ = rows_workspace_bytes_ = 0;
  const auto row_bytes = static_cast<size_t>(grown) * sizeof(ops::gpu::SampleRow);
  const auto id_bytes = static_cast<size_t>(grown) * sizeof(int32_t);
  KVTIER_ASSIGN_OR_RETURN(void* host_rows, gpu::PinnedAlloc(row_bytes));
  host_rows_ = static_cast<ops::gpu::SampleRow*>(host_rows);
  KVTIER_ASSIGN_OR_RETURN(void* host_ids, gpu::PinnedAlloc(id_bytes));
  host_ids_ = static_cast<int32_t*>(host_ids);
  KVTIER_ASSIGN_OR_RETURN(device_rows_, gpu::DeviceAlloc(row_bytes + id_bytes));
  const int64_t ws = ops::gpu::SampleRowsWorkspaceBytes(vocab_, grown);
  KVTIER_ASSIGN_OR_RETURN(rows_workspace_, gpu::DeviceAlloc(static_cast<size_t>(ws)));
  rows_workspace_bytes_ = ws;
  rows_capacity_ = grown;
  return absl::OkStatus();
}

absl::Status GpuSampler::WaitFor(gpu::StreamHandle stream) {
  KVTIER_ASSIGN_OR_RETURN(gpu::Event done, gpu::Event::Create());
  KVTIER_RETURN_IF_ERROR(done.Record(stream));
  return done.Synchronize();
}

absl::StatusOr<std::vector<int32_t>> GpuSampler::ChooseRows(const float* logits,
                                                            std::span<const SampleSpec> rows,
                                                            gpu::StreamHandle stream) {
  std::vector<int32_t> tokens(rows.size(), -1);
  int64_t n = 0;
  for (const SampleSpec& r : rows) n += r.wanted ? 1 : 0;
  if (n == 0) {  // nothing to choose, but the step's KV writes must be done before it returns
    KVTIER_RETURN_IF_ERROR(WaitFor(stream));
    return tokens;
  }
  KVTIER_RETURN_IF_ERROR(EnsureRows(n));
  int64_t i = 0;
  for (size_t b = 0; b < rows.size(); ++b) {
    if (!rows[b].wanted) continue;
    const ops::SamplingParams& p = rows[b].params;
    host_rows_[i++] = {.logit_row = static_cast<int32_t>(b),
                       .top_k = p.top_k,
                       .temperature = p.temperature,
                       .top_p = p.top_p,
                       .seed = p.seed,
                       .step = rows[b].step};
  }
  auto* device_rows = static_cast<ops::gpu::SampleRow*>(device_rows_);
  auto* device_ids = reinterpret_cast<int32_t*>(device_rows + rows_capacity_);
  const auto row_bytes = static_cast<size_t>(n) * sizeof(ops::gpu::SampleRow);
  KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(device_rows, host_rows_, row_bytes, stream));
  KVTIER_RETURN_IF_ERROR(ops::gpu::SampleRows(logits, vocab_, device_rows, n, rows_workspace_,
                                              rows_workspace_bytes_, device_ids, stream));
  KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(host_ids_, device_ids, 4 * static_cast<size_t>(n), stream));
  KVTIER_RETURN_IF_ERROR(WaitFor(stream));
  i = 0;
  for (size_t b = 0; b < rows.size(); ++b) {
    if (rows[b].wanted) tokens[b] = host_ids_[i++];
  }
  return tokens;
}

}  // namespace kvtier::engine
