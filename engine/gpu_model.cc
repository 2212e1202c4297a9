#include "engine/gpu_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "engine/rope_config.h"
#include "engine/safetensors.h"
#include "kernels/ops/gpu/attention_gpu.h"
#include "kernels/ops/gpu/ops_gpu.h"

namespace kvtier::engine {

namespace og = ops::gpu;

// One call's work: its inputs (device addresses), sizes and outputs.
struct GpuModel::Step {
  StepInputs in;
  int64_t max_kv_len = 0;  // host bound of the context: the decode split plan (a graph's bucket)
  int64_t max_q_len = 0;   // host bound of a sequence's query count: the prefill launch
  int64_t logit_rows = 0;  // 1, or n for all positions, or a batch's sequences
  std::vector<int32_t> gather;  // [logit_rows] rows whose logits are wanted, when they are not
                                // the last logit_rows rows (a batch with prefill chunks)
  float* logits = nullptr;
  GpuKvPool* pool = nullptr;
  void* workspace = nullptr;  // the attention's split results (decode; prefill's split over keys)
  int64_t workspace_bytes = 0;
};

namespace {

// Element `i` of a 16-bit device array.
template <typename P>
P* At(P* base, int64_t i) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P*>(reinterpret_cast<Byte*>(base) + 2 * i);
}

// Logits rows to make room for when a step has `rows`: a power of two, so that the buffer grows
// (moving, which drops the recorded graphs that hold it) a few times at most.
int64_t RowsRoom(int64_t rows) {
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(rows)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuModel>> GpuModel::Load(const std::string& dir,
                                                         const GpuModelOptions& options) {
  if (const std::string why = gpu::UnavailableReason(); !why.empty()) {
    return absl::FailedPreconditionError(fmt::format("the GPU backend cannot run: {}", why));
  }
  if (options.max_chunk_tokens < 1) {
    return absl::InvalidArgumentError("GpuModelOptions: max_chunk_tokens must be positive");
  }
  KVTIER_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  KVTIER_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(dir));
  const og::DType dtype = options.dtype.value_or(
      config.dtype == WeightDtype::kFloat16 ? og::DType::kFp16 : og::DType::kBf16);
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<GpuWeights> weights,
                          GpuWeights::Upload(config, checkpoint, dtype));
  KVTIER_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::Create());
  const int64_t chunk = std::min<int64_t>(options.max_chunk_tokens, config.max_position_embeddings);
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<GpuScratch> scratch,
                          GpuScratch::Create(config, chunk, config.max_position_embeddings));
  const std::vector<float> inv_freq = RopeInvFreq(config.rope, config.head_dim);
  KVTIER_ASSIGN_OR_RETURN(void* inv_freq_dev, gpu::DeviceAlloc(inv_freq.size() * sizeof(float)));
  std::unique_ptr<GpuModel> model;
  absl::StatusOr<std::unique_ptr<og::GemmRunner>> gemm = og::GemmRunner::Create();
  if (!gemm.ok()) {
    (void)gpu::DeviceFree(inv_freq_dev);
    return gemm.status();
  }
  GpuModelOptions kept = options;
  kept.dtype = dtype;
  kept.max_chunk_tokens = chunk;
  model.reset(new GpuModel(std::move(config), kept, std::move(weights), std::move(stream),
                           std::move(scratch), inv_freq_dev, *std::move(gemm)));
  KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(inv_freq_dev, inv_freq.data(),
                                        inv_freq.size() * sizeof(float), model->stream()));
  KVTIER_RETURN_IF_ERROR(model->stream_.Synchronize());
  return model;
}

GpuModel::GpuModel(ModelConfig config, GpuModelOptions options, std::unique_ptr<GpuWeights> weights,
                   gpu::Stream stream, std::unique_ptr<GpuScratch> scratch, void* inv_freq,
                   std::unique_ptr<og::GemmRunner> gemm)
    : config_(std::move(config)),
      options_(options),
      weights_(std::move(weights)),
      stream_(std::move(stream)),
      scratch_(std::move(scratch)),
      inv_freq_(static_cast<float*>(inv_freq)),
      gemm_(std::move(gemm)) {}

GpuModel::~GpuModel() {
  (void)stream_.Synchronize();
  (void)gpu::DeviceFree(inv_freq_);
}

void GpuModel::SetDecodePath(bool gemv, bool graphs) {
  options_.decode_gemv = gemv;
  options_.decode_graphs = graphs;
  graphs_.Clear();
  batch_graphs_.Clear();
}

ops::PagedKvGeometry GpuModel::KvGeometry(int64_t block_tokens) const {
  return {.layers = config_.num_layers,
          .block_tokens = block_tokens,
          .kv_heads = config_.num_kv_heads,
          .head_dim = config_.head_dim};
}

absl::Status GpuModel::CheckPool(const GpuKvPool& pool) const {
  const ops::PagedKvGeometry& g = pool.geometry();
  if (g.layers != config_.num_layers || g.kv_heads != config_.num_kv_heads ||
      g.head_dim != config_.head_dim || pool.dtype() != dtype()) {
    return absl::InvalidArgumentError(
        "Forward: the KV pool's geometry or dtype is not this model's");
  }
  return absl::OkStatus();
}

absl::Status GpuModel::CheckTokens(int64_t n) const {
  if (n == 0 || n > options_.max_chunk_tokens) {
    return absl::InvalidArgumentError(
        fmt::format("Forward: {} tokens; a call takes 1 to {} (max_chunk_tokens)", n,
                    options_.max_chunk_tokens));
  }
  return absl::OkStatus();
}

absl::StatusOr<const float*> GpuModel::Forward(std::span<const int32_t> tokens, int64_t start,
                                               std::span<const int32_t> block_table,
                                               GpuKvPool& pool, bool all_logits) {
  const auto n = static_cast<int64_t>(tokens.size());
  KVTIER_RETURN_IF_ERROR(CheckTokens(n));
  const ChunkInput chunk{.tokens = tokens, .start = start, .block_table = block_table};
  KVTIER_RETURN_IF_ERROR(
      CheckBatch({&chunk, 1}, config_, pool.geometry().block_tokens, pool.num_slots()));
  KVTIER_RETURN_IF_ERROR(CheckPool(pool));
  Step step;
  step.logit_rows = all_logits ? n : 1;
  step.max_q_len = n;
  step.workspace = scratch_->decode_workspace;
  step.workspace_bytes = scratch_->decode_workspace_bytes;
  KVTIER_ASSIGN_OR_RETURN(step.logits, scratch_->EnsureLogitsRows(step.logit_rows));
  KVTIER_ASSIGN_OR_RETURN(step.in, scratch_->Upload(tokens, start, block_table,
                                                    pool.geometry().block_tokens, stream()));
  step.pool = &pool;
  if (n == 1 && options_.decode_graphs) {
    step.max_kv_len = GpuDecodeGraphs::Bucket(start + 1);
    KVTIER_RETURN_IF_ERROR(graphs_.Launch(
        {.batch = 1, .context = step.max_kv_len}, {.pool = pool.data(), .logits = step.logits},
        [&] { return Enqueue(step); }, stream()));
  } else {
    step.max_kv_len = start + n;
    KVTIER_RETURN_IF_ERROR(Enqueue(step));
  }
  return step.logits;
}

absl::StatusOr<const float*> GpuModel::Forward(std::span<const ChunkInput> batch, GpuKvPool& pool) {
  const int64_t bt = pool.geometry().block_tokens;
  KVTIER_RETURN_IF_ERROR(CheckPool(pool));
  KVTIER_RETURN_IF_ERROR(CheckBatch(batch, config_, bt, pool.num_slots()));
  const ForwardPlan plan = PlanForward(batch, bt);
  KVTIER_RETURN_IF_ERROR(CheckTokens(plan.total));
  if (plan.decode_only() && options_.decode_graphs) {
    const int64_t rows = GpuDecodeInputs::BatchBucket(plan.batch);
    if (rows <= std::min(GpuDecodeInputs::kMaxBatch, options_.max_chunk_tokens)) {
      absl::StatusOr<const float*> logits = ForwardDecodeGraph(plan, rows, pool);
      // OutOfRange: no scratch slot for the padding rows in this pool (nothing was enqueued).
      if (logits.ok() || !absl::IsOutOfRange(logits.status())) return logits;
    }
  }
  Step step;
  step.logit_rows = plan.batch;
  step.max_kv_len = plan.max_kv_len;
  step.max_q_len = plan.max_q_len;
  if (!plan.decode_only()) step.gather = plan.last_rows;
  step.pool = &pool;
  KVTIER_ASSIGN_OR_RETURN(step.logits, scratch_->EnsureLogitsRows(RowsRoom(plan.batch)));
  KVTIER_ASSIGN_OR_RETURN(step.in, scratch_->UploadPlan(plan, config_, stream()));
  step.workspace = scratch_->batch_decode_workspace();
  step.workspace_bytes = scratch_->batch_decode_workspace_bytes();
  KVTIER_RETURN_IF_ERROR(Enqueue(step));
  return step.logits;
}

absl::StatusOr<const float*> GpuModel::ForwardDecodeGraph(const ForwardPlan& plan, int64_t rows,
                                                          GpuKvPool& pool) {
  const int64_t bt = pool.geometry().block_tokens;
  Step step;
  step.logit_rows = rows;
  step.max_kv_len = GpuDecodeGraphs::Bucket(plan.max_kv_len);
  step.max_q_len = 1;
  step.pool = &pool;
  KVTIER_ASSIGN_OR_RETURN(step.logits, scratch_->EnsureLogitsRows(RowsRoom(rows)));
  const int64_t stride = (step.max_kv_len + bt - 1) / bt;
  const int64_t max_stride =
      (GpuDecodeGraphs::Bucket(config_.max_position_embeddings) + bt - 1) / bt;
  KVTIER_ASSIGN_OR_RETURN(
      step.in, decode_inputs_.Upload(plan, rows, stride, max_stride, config_, pool, stream()));
  step.workspace = decode_inputs_.workspace();
  step.workspace_bytes = decode_inputs_.workspace_bytes();
  KVTIER_RETURN_IF_ERROR(batch_graphs_.Launch(
      {.batch = rows, .context = step.max_kv_len},
      {.pool = pool.data(),
       .logits = step.logits,
       .inputs = decode_inputs_.base(),
       .workspace = step.workspace},
      [&] { return Enqueue(step); }, stream()));
  return step.logits;
}

absl::Status GpuModel::Enqueue(const Step& s) {
  const og::DType dt = dtype();
  const int64_t n = s.in.n, hidden = config_.hidden_size;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  KVTIER_RETURN_IF_ERROR(
      og::Embedding(dt, s.in.ids, n, weights_->embed(), hidden, scratch_->residual, stream()));
  KVTIER_RETURN_IF_ERROR(Done("embed"));
  KVTIER_RETURN_IF_ERROR(og::RmsNorm(dt, scratch_->residual, weights_->layer(0).input_norm, n,
                                     hidden, eps, scratch_->h, stream()));
  KVTIER_RETURN_IF_ERROR(Done("norm"));
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    KVTIER_RETURN_IF_ERROR(Attention(l, s));
    KVTIER_RETURN_IF_ERROR(og::FusedAddRmsNorm(dt, scratch_->h, scratch_->residual,
                                               weights_->layer(l).post_norm, n, hidden, eps,
                                               stream()));
    KVTIER_RETURN_IF_ERROR(Done("norm"));
    KVTIER_RETURN_IF_ERROR(Mlp(l, s));
    const bool last = l + 1 == config_.num_layers;
    const void* next_norm = last ? weights_->final_norm() : weights_->layer(l + 1).input_norm;
    KVTIER_RETURN_IF_ERROR(og::FusedAddRmsNorm(dt, scratch_->h, scratch_->residual, next_norm, n,
                                               hidden, eps, stream()));
    KVTIER_RETURN_IF_ERROR(Done("norm"));
  }
  const void* from = At(static_cast<const void*>(scratch_->h), (n - s.logit_rows) * hidden);
  if (!s.gather.empty()) {  // each sequence's last row, side by side (DMA, no kernel)
    std::vector<gpu::CopyOp> rows;
    for (size_t i = 0; i < s.gather.size(); ++i) {
      rows.push_back({.dst = At(scratch_->gate_up, static_cast<int64_t>(i) * hidden),
                      .src = At(static_cast<const void*>(scratch_->h), s.gather[i] * hidden),
                      .bytes = static_cast<size_t>(2 * hidden)});
    }
    KVTIER_RETURN_IF_ERROR(gpu::CopyBatchAsync(rows, stream()));
    from = scratch_->gate_up;
  }
  KVTIER_RETURN_IF_ERROR(Linear(from, weights_->output(), nullptr, s.logit_rows, config_.vocab_size,
                                hidden, s.logits, /*y_float=*/true));
  return Done("lm_head");
}

absl::Status GpuModel::Attention(int64_t layer, const Step& s) {
  const GpuLayerWeights& w = weights_->layer(layer);
  const int64_t n = s.in.n, hidden = config_.hidden_size;
  const int64_t q_dim = config_.q_dim(), kv_dim = config_.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  void* qkv = scratch_->qkv;
  void *q, *k, *v;
  int64_t q_stride, kv_stride;
  if (config_.qk_norm) {  // q, k, v apart, so that each head's RmsNorm sees contiguous rows
    q = qkv;
    k = At(qkv, n * q_dim);
    v = At(qkv, n * (q_dim + kv_dim));
    q_stride = q_dim;
    kv_stride = kv_dim;
    const int64_t offsets[3] = {0, q_dim, q_dim + kv_dim};
    const int64_t rows[3] = {q_dim, kv_dim, kv_dim};
    void* outs[3] = {q, k, v};
    for (int i = 0; i < 3; ++i) {
      const void* bias = w.qkv_bias != nullptr ? At(w.qkv_bias, offsets[i]) : nullptr;
      KVTIER_RETURN_IF_ERROR(Linear(scratch_->h, At(w.qkv, offsets[i] * hidden), bias, n, rows[i],
                                    hidden, outs[i], false));
    }
    KVTIER_RETURN_IF_ERROR(Done("qkv"));
  } else {  // one GEMM; q, k, v are column ranges of each token's row
    KVTIER_RETURN_IF_ERROR(Linear(scratch_->h, w.qkv, w.qkv_bias, n, qkv_dim, hidden, qkv, false));
    KVTIER_RETURN_IF_ERROR(Done("qkv"));
    q = qkv;
    k = At(qkv, q_dim);
    v = At(qkv, q_dim + kv_dim);
    q_stride = kv_stride = qkv_dim;
  }
  if (config_.qk_norm) {
    KVTIER_RETURN_IF_ERROR(NormalizeHeads(layer, n, q, k));
    KVTIER_RETURN_IF_ERROR(Done("qk_norm"));
  }
  const ops::PagedKvGeometry& g = s.pool->geometry();
  KVTIER_RETURN_IF_ERROR(og::RopeAndWriteKv(dtype(), q, q_stride, config_.num_heads, k, v,
                                            kv_stride, s.in.positions, inv_freq_, s.in.token_slots,
                                            n, g, layer, s.pool->data(), stream()));
  KVTIER_RETURN_IF_ERROR(Done("rope_kv"));
  const ops::AttentionParams params{.kv = g,
                                    .layer = layer,
                                    .q_heads = config_.num_heads,
                                    .scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim)),
                                    .sliding_window = config_.sliding_window};
  const og::AttentionBatch batch{.q = q,
                                 .q_token_stride = q_stride,
                                 .kv_lens = s.in.kv_lens,
                                 .block_tables = s.in.block_tables,
                                 .max_blocks = s.in.max_blocks,
                                 .batch = s.in.batch,
                                 .pool = s.pool->data(),
                                 .out = scratch_->attn};
  if (n == s.in.batch) {  // one query per sequence: decode
    KVTIER_RETURN_IF_ERROR(og::AttentionDecode(dtype(), params, batch, s.max_kv_len, s.workspace,
                                               s.workspace_bytes, stream()));
  } else {
    const og::PrefillSplitSpace split{
        .max_kv_len = s.max_kv_len, .workspace = s.workspace, .workspace_bytes = s.workspace_bytes};
    KVTIER_RETURN_IF_ERROR(
        og::AttentionPrefill(dtype(), params, batch, s.in.q_indptr, s.max_q_len, stream(), split));
  }
  KVTIER_RETURN_IF_ERROR(Done("attention"));
  KVTIER_RETURN_IF_ERROR(
      Linear(scratch_->attn, w.o_proj, nullptr, n, hidden, q_dim, scratch_->h, false));
  return Done("o_proj");
}

absl::Status GpuModel::NormalizeHeads(int64_t layer, int64_t n, void* q, void* k) {
  const GpuLayerWeights& w = weights_->layer(layer);
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  const int64_t hd = config_.head_dim;
  KVTIER_RETURN_IF_ERROR(
      og::RmsNorm(dtype(), q, w.q_norm, n * config_.num_heads, hd, eps, q, stream()));
  return og::RmsNorm(dtype(), k, w.k_norm, n * config_.num_kv_heads, hd, eps, k, stream());
}

absl::Status GpuModel::Mlp(int64_t layer, const Step& s) {
  const GpuLayerWeights& w = weights_->layer(layer);
  const int64_t n = s.in.n, hidden = config_.hidden_size, inter = config_.intermediate_size;
  KVTIER_RETURN_IF_ERROR(
      Linear(scratch_->h, w.gate_up, nullptr, n, 2 * inter, hidden, scratch_->gate_up, false));
  KVTIER_RETURN_IF_ERROR(Done("gate_up"));
  // The activation apart even in a decode step: GemvSiluMul, which computes it as the product
  // reads it, recomputes it in every block (51.9 us for the 8B down projection on the H100, against
  // 48.1 for SiluAndMul then Gemv).
  KVTIER_RETURN_IF_ERROR(
      og::SiluAndMul(dtype(), scratch_->gate_up, n, inter, scratch_->act, stream()));
  KVTIER_RETURN_IF_ERROR(
      Linear(scratch_->act, w.down, nullptr, n, hidden, inter, scratch_->h, false));
  return Done("down");
}

absl::Status GpuModel::Linear(const void* x, const void* w, const void* bias, int64_t m, int64_t n,
                              int64_t k, void* y, bool y_float) {
  const og::GemmArgs args{
      .x = x, .w = w, .bias = bias, .m = m, .n = n, .k = k, .y = y, .y_float = y_float};
  if (m <= og::kGemvMaxRows && options_.decode_gemv) return og::Gemv(dtype(), args, stream());
  return gemm_->Run(dtype(), args, stream());
}

}  // namespace kvtier::engine
