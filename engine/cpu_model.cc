#include "engine/cpu_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/rope_config.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/embedding.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/rms_norm.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/swiglu.h"

namespace kvtier::engine {

namespace ref = ops::ref;

// Per-call activations; every array is [n, ...] for the n tokens of the step.
struct CpuModel::Scratch {
  int64_t n = 0;
  std::vector<float> h;         // [n, hidden]  the current sublayer's input / output
  std::vector<float> residual;  // [n, hidden]  the residual stream
  std::vector<float> qkv;       // [n, q_dim + 2 kv_dim]
  std::vector<float> q, k, v;   // [n, q_dim], [n, kv_dim], [n, kv_dim]
  std::vector<float> attn;      // [n, q_dim]
  std::vector<float> gate_up;   // [n, 2 intermediate]
  std::vector<float> act;       // [n, intermediate]

  Scratch(const ModelConfig& c, int64_t tokens)
      : n(tokens),
        h(n * c.hidden_size),
        residual(n * c.hidden_size),
        qkv(n * (c.q_dim() + 2 * c.kv_dim())),
        q(n * c.q_dim()),
        k(n * c.kv_dim()),
        v(n * c.kv_dim()),
        attn(n * c.q_dim()),
        gate_up(n * 2 * c.intermediate_size),
        act(n * c.intermediate_size) {}
};

absl::StatusOr<std::unique_ptr<CpuModel>> CpuModel::Load(const std::string& dir) {
  KVTIER_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  KVTIER_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(dir));
  KVTIER_ASSIGN_OR_RETURN(HostWeights weights, LoadHostWeights(config, checkpoint));
  return std::make_unique<CpuModel>(std::move(config), std::move(weights));
}

CpuModel::CpuModel(ModelConfig config, HostWeights weights)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      inv_freq_(RopeInvFreq(config_.rope, config_.head_dim)) {}

ops::PagedKvGeometry CpuModel::KvGeometry(int64_t block_tokens) const {
  return {.layers = config_.num_layers,
          .block_tokens = block_tokens,
          .kv_heads = config_.num_kv_heads,
          .head_dim = config_.head_dim};
}

absl::Status CpuModel::CheckPool(const CpuKvPool& pool) const {
  const ops::PagedKvGeometry& g = pool.geometry();
  if (g.layers != config_.num_layers || g.kv_heads != config_.num_kv_heads ||
      g.head_dim != config_.head_dim) {
    return absl::InvalidArgumentError("Forward: the KV pool's geometry is not this model's");
  }
  return absl::OkStatus();
}

void CpuModel::Attention(int64_t layer, Scratch& s, const ForwardPlan& plan,
                         CpuKvPool& pool) const {
  const HostLayerWeights& w = weights_.layers[layer];
  const int64_t n = s.n, hidden = config_.hidden_size, hd = config_.head_dim;
  const int64_t q_dim = config_.q_dim(), kv_dim = config_.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  ref::Gemm(s.h.data(), w.qkv.data(), w.qkv_bias.empty() ? nullptr : w.qkv_bias.data(), n, qkv_dim,
            hidden, s.qkv.data());
  for (int64_t i = 0; i < n; ++i) {  // split [q | k | v] rows into contiguous arrays
    const float* row = s.qkv.data() + i * qkv_dim;
    std::copy(row, row + q_dim, s.q.data() + i * q_dim);
    std::copy(row + q_dim, row + q_dim + kv_dim, s.k.data() + i * kv_dim);
    std::copy(row + q_dim + kv_dim, row + qkv_dim, s.v.data() + i * kv_dim);
  }
  const float eps = static_cast<float>(config_.rms_norm_eps);
  if (config_.qk_norm) {  // Qwen3: per head, before RoPE
    ref::RmsNorm(s.q.data(), w.q_norm.data(), n * config_.num_heads, hd, eps, s.q.data());
    ref::RmsNorm(s.k.data(), w.k_norm.data(), n * config_.num_kv_heads, hd, eps, s.k.data());
  }
  ref::ApplyRope(s.q.data(), plan.positions.data(), inv_freq_.data(), n, config_.num_heads, hd);
  ref::ApplyRope(s.k.data(), plan.positions.data(), inv_freq_.data(), n, config_.num_kv_heads, hd);
  const ops::PagedKvGeometry& g = pool.geometry();
  ref::WriteKv(s.k.data(), s.v.data(), plan.token_slots.data(), n, g, layer, pool.data());
  const ops::AttentionParams params{.kv = g,
                                    .layer = layer,
                                    .q_heads = config_.num_heads,
                                    .scale = 1.0f / std::sqrt(static_cast<float>(hd)),
                                    .sliding_window = config_.sliding_window};
  if (plan.decode_only()) {  // one query per sequence: the decode kernel's path
    ref::AttentionDecode(params, s.q.data(), plan.kv_lens.data(), plan.block_tables.data(),
                         plan.max_blocks, plan.batch, pool.data(), s.attn.data());
  } else {
    ref::AttentionPrefill(params, s.q.data(), plan.q_indptr.data(), plan.kv_lens.data(),
                          plan.block_tables.data(), plan.max_blocks, plan.batch, pool.data(),
                          s.attn.data());
  }
  ref::Gemm(s.attn.data(), w.o_proj.data(), nullptr, n, hidden, q_dim, s.h.data());
}

void CpuModel::Mlp(int64_t layer, Scratch& s) const {
  const HostLayerWeights& w = weights_.layers[layer];
  const int64_t n = s.n, hidden = config_.hidden_size, inter = config_.intermediate_size;
  ref::Gemm(s.h.data(), w.gate_up.data(), nullptr, n, 2 * inter, hidden, s.gate_up.data());
  ref::SiluAndMul(s.gate_up.data(), n, inter, s.act.data());
  ref::Gemm(s.act.data(), w.down.data(), nullptr, n, hidden, inter, s.h.data());
}

absl::Status CpuModel::Forward(std::span<const int32_t> tokens, int64_t start,
                               std::span<const int32_t> block_table, CpuKvPool& pool,
                               bool all_logits, std::vector<float>* logits) const {
  const ChunkInput chunk{.tokens = tokens, .start = start, .block_table = block_table};
  KVTIER_RETURN_IF_ERROR(CheckPool(pool));
  KVTIER_RETURN_IF_ERROR(
      CheckBatch({&chunk, 1}, config_, pool.geometry().block_tokens, pool.num_slots()));
  const ForwardPlan plan = PlanForward({&chunk, 1}, pool.geometry().block_tokens);
  std::vector<int32_t> rows(all_logits ? plan.total : 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<int32_t>(plan.total - static_cast<int64_t>(rows.size() - i));
  }
  Run(plan, pool, rows, logits);
  return absl::OkStatus();
}

absl::Status CpuModel::Forward(std::span<const ChunkInput> batch, CpuKvPool& pool,
                               std::vector<float>* logits) const {
  KVTIER_RETURN_IF_ERROR(CheckPool(pool));
  KVTIER_RETURN_IF_ERROR(
      CheckBatch(batch, config_, pool.geometry().block_tokens, pool.num_slots()));
  const ForwardPlan plan = PlanForward(batch, pool.geometry().block_tokens);
  Run(plan, pool, plan.last_rows, logits);
  return absl::OkStatus();
}

void CpuModel::Run(const ForwardPlan& plan, CpuKvPool& pool, std::span<const int32_t> rows,
                   std::vector<float>* logits) const {
  const int64_t n = plan.total, hidden = config_.hidden_size;
  Scratch s(config_, n);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  ref::Embedding(plan.ids.data(), n, weights_.embed.data(), config_.vocab_size, hidden,
                 s.residual.data());
  ref::RmsNorm(s.residual.data(), weights_.layers[0].input_norm.data(), n, hidden, eps, s.h.data());
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    Attention(l, s, plan, pool);
    ref::FusedAddRmsNorm(s.h.data(), s.residual.data(), weights_.layers[l].post_norm.data(), n,
                         hidden, eps);
    Mlp(l, s);
    const bool last = l + 1 == config_.num_layers;
    const float* next_norm =
        last ? weights_.final_norm.data() : weights_.layers[l + 1].input_norm.data();
    ref::FusedAddRmsNorm(s.h.data(), s.residual.data(), next_norm, n, hidden, eps);
  }
  // The chosen rows side by side, then one GEMM: each logit row is computed from its own row only.
  std::vector<float> picked(rows.size() * hidden);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(s.h.data() + int64_t{rows[i]} * hidden, hidden, picked.data() + i * hidden);
  }
  const auto m = static_cast<int64_t>(rows.size());
  logits->resize(m * config_.vocab_size);
  ref::Gemm(picked.data(), weights_.output(), nullptr, m, config_.vocab_size, hidden,
            logits->data());
}

}  // namespace kvtier::engine
