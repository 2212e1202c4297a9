// The decoder forward pass on the GPU in 16-bit floats (bf16, or fp16), computing what CpuModel
// (engine/cpu_model.h) computes — and what transformers computes in that dtype — from the GPU
// operators in kernels/ops/gpu, with K/V read and written in place in a GpuKvPool in the daemon's
// payload layout:
//   h = embed(tokens)
//   per layer: a = attention(rmsnorm(h)); h += a; m = mlp(rmsnorm(h)); h += m
//   logits = lm_head(rmsnorm(h))          (float32)
// Prefill runs cuBLASLt GEMMs (the tiled kernel in the HIP build) and the paged prefill attention
// kernel; a decode step (one token) runs Gemv and the split-K decode attention kernel, launched as
// programmatic dependents (kernels/ops/gpu/pdl.h) and replayed from a graph recorded per context
// bucket (gpu_decode_graphs.h); a batched step where every sequence decodes one token is replayed
// from a graph per (batch-size bucket, context bucket), padded (gpu_decode_inputs.h). RoPE and the
// K/V store are one launch in both.
//
// Thread-safety: not thread-safe. A model owns its stream and scratch: one thread drives it, one
// call at a time (one sequence's step, then another's).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "common/status.h"
#include "engine/forward_batch.h"
#include "engine/gpu_decode_graphs.h"
#include "engine/gpu_decode_inputs.h"
#include "engine/gpu_kv_pool.h"
#include "engine/gpu_scratch.h"
#include "engine/gpu_weights.h"
#include "engine/model_config.h"
#include "kernels/gpu_runtime.h"
#include "kernels/ops/gpu/gemm_gpu.h"
#include "kernels/ops/paged_kv.h"

namespace kvtier::engine {

struct GpuModelOptions {
  // Unset: the checkpoint's dtype if it is bf16 or fp16, bf16 for a float32 checkpoint.
  std::optional<ops::gpu::DType> dtype;
  // Tokens per Forward call at most (a longer prompt is prefilled in chunks of this size, each
  // attending to the K/V of the previous ones); sizes the activation buffers.
  int64_t max_chunk_tokens = 8192;
  // Decode steps' linear layers by Gemv (else by the GEMM runner, for comparison).
  bool decode_gemv = true;
  // Decode steps — a single sequence's, and batched steps of up to GpuDecodeInputs::kMaxBatch
  // sequences that each decode one token — replayed from recorded graphs (else launched kernel by
  // kernel).
  bool decode_graphs = true;
};

class GpuModel {
 public:
  // Loads config.json (+ generation_config.json) and the safetensors in `dir` onto the current
  // device. Errors: the loaders' (naming file and field or tensor); FailedPrecondition in a build
  // without a GPU backend; the vendor's (no device, out of memory).
  static absl::StatusOr<std::unique_ptr<GpuModel>> Load(const std::string& dir,
                                                        const GpuModelOptions& options = {});
  ~GpuModel();

  const ModelConfig& config() const { return config_; }
  const GpuModelOptions& options() const { return options_; }
  ops::gpu::DType dtype() const { return weights_->dtype(); }
  uint64_t weight_bytes() const { return weights_->bytes(); }
  gpu::StreamHandle stream() const { return stream_.handle(); }
  // Graphs recorded so far: for a single sequence's decode, and for batched decode steps.
  size_t recorded_graphs() const { return graphs_.recorded(); }
  size_t recorded_batch_graphs() const { return batch_graphs_.recorded(); }

  // Changes how decode steps run (GpuModelOptions' decode_gemv and decode_graphs), dropping the
  // recorded graphs: for benchmarks that compare the paths on one loaded model.
  void SetDecodePath(bool gemv, bool graphs);

  // Profiling: `hook` is called on the host after each operator a pass enqueues, with the
  // operator's name — "embed", "norm", "qkv", "qk_norm", "rope_kv", "attention", "o_proj",
  // "gate_up", "down" (with its activation), "lm_head" — while a pass is enqueued (or recorded
  // into a graph; a replay calls it not at all); an error it returns fails the call. The benchmark
  // records an event there to time each kind of operator. Empty: none (the default).
  using OpHook = std::function<absl::Status(const char* op)>;
  void SetOpHook(OpHook hook) { op_hook_ = std::move(hook); }

  // The KV geometry of this model for pool slots of `block_tokens` tokens.
  ops::PagedKvGeometry KvGeometry(int64_t block_tokens) const;

  // Runs `tokens` (1 .. max_chunk_tokens of them) at positions start .. start + n - 1 of one
  // sequence. The K/V of its first `start` tokens must be in `pool`; this call writes the K/V of
  // the n new ones. block_table [>= ceil((start + n) / block_tokens)]: the sequence's slots.
  // Returns the logits in device memory, float32: [n, vocab] when all_logits, else [1, vocab] (the
  // last token's). They are valid until the next call and ready once stream() reaches them (work
  // enqueued on stream() may read them; the host must synchronize first).
  // InvalidArgument (nothing enqueued) for a token id >= vocab, no tokens or more than
  // max_chunk_tokens, positions past max_position_embeddings, a block table too short or naming
  // slots outside the pool, a pool of another geometry or dtype.
  absl::StatusOr<const float*> Forward(std::span<const int32_t> tokens, int64_t start,
                                       std::span<const int32_t> block_table, GpuKvPool& pool,
                                       bool all_logits);

  // One step over several sequences at once (forward_batch.h), 1 .. max_chunk_tokens tokens in
  // all. Returns logits [batch, vocab] in device memory, float32, row b the last token's of entry
  // b, valid and ready as Forward's (rows past the batch, if any, are padding). A step whose
  // chunks are all single tokens runs the decode attention kernel over the batch — replayed from
  // the graph of its (batch-size bucket, context bucket) when decode_graphs, padded to the bucket
  // — else the prefill kernel over the ragged batch, kernel by kernel.
  // InvalidArgument (nothing enqueued) as Forward, naming the batch entry.
  absl::StatusOr<const float*> Forward(std::span<const ChunkInput> batch, GpuKvPool& pool);

 private:
  struct Step;
  GpuModel(ModelConfig config, GpuModelOptions options, std::unique_ptr<GpuWeights> weights,
           gpu::Stream stream, std::unique_ptr<GpuScratch> scratch, void* inv_freq,
           std::unique_ptr<ops::gpu::GemmRunner> gemm);

  absl::Status CheckPool(const GpuKvPool& pool) const;
  // A decode-only batch as `rows` rows (its batch-size bucket), from its graph. OutOfRange, with
  // nothing enqueued, when the padding rows have no scratch slot (GpuDecodeInputs::Upload): the
  // caller runs the step kernel by kernel instead.
  absl::StatusOr<const float*> ForwardDecodeGraph(const ForwardPlan& plan, int64_t rows,
                                                  GpuKvPool& pool);
  // InvalidArgument unless 1 <= n <= max_chunk_tokens.
  absl::Status CheckTokens(int64_t n) const;
  // Enqueues the whole pass for the inputs in `step` (device addresses only: recordable).
  absl::Status Enqueue(const Step& step);
  // scratch h [n, hidden] (normalized input) -> h = attention output after o_proj.
  absl::Status Attention(int64_t layer, const Step& step);
  // Qwen3's RMSNorm over each head of q [n, q_heads, head_dim] and k [n, kv_heads, head_dim]
  // (contiguous), in place, before RoPE.
  absl::Status NormalizeHeads(int64_t layer, int64_t n, void* q, void* k);
  // scratch h [n, hidden] (normalized input) -> h = MLP output.
  absl::Status Mlp(int64_t layer, const Step& step);
  // y [m, n] = x [m, k] W^T (+ bias): Gemv for a decode step's rows, else the GEMM runner.
  absl::Status Linear(const void* x, const void* w, const void* bias, int64_t m, int64_t n,
                      int64_t k, void* y, bool y_float);
  // The op hook's call for `op` (none set: OK).
  absl::Status Done(const char* op) const { return op_hook_ ? op_hook_(op) : absl::OkStatus(); }

  ModelConfig config_;
  GpuModelOptions options_;
  std::unique_ptr<GpuWeights> weights_;
  gpu::Stream stream_;
  std::unique_ptr<GpuScratch> scratch_;
  float* inv_freq_;  // [head_dim / 2] device memory
  std::unique_ptr<ops::gpu::GemmRunner> gemm_;
  GpuDecodeGraphs graphs_;         // a single sequence's decode step (Forward of one token)
  GpuDecodeGraphs batch_graphs_;   // batched decode steps
  GpuDecodeInputs decode_inputs_;  // what batch_graphs_ read
  OpHook op_hook_;
};

}  // namespace kvtier::engine
