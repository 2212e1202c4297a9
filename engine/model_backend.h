// What the engine loop needs from a model on a device (nano-vllm's ModelRunner): run one batched
// step over its own KV pool and choose the next token for the sequences that asked for one. The CPU
// backend (cpu_backend.h) and the GPU backend (gpu_backend.h) implement it; the loop
// (llm_engine.h) is the same for both.
//
// Thread-safety: implementations are not thread-safe; one owner (the engine loop).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/forward_batch.h"
#include "engine/model_config.h"
#include "kernels/ops/sampling.h"

namespace kvtier::engine {

// How to choose the token after one batch entry's last token.
struct SampleSpec {
  bool wanted = false;  // false: a prefill chunk that does not reach the end; nothing is chosen
  ops::SamplingParams params;
  uint64_t step = 0;  // the draw counter: the index of the token in the sequence's output
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;

  virtual const ModelConfig& config() const = 0;
  // The KV pool the batches' block tables index.
  virtual int64_t block_tokens() const = 0;
  virtual int32_t num_slots() const = 0;
  // The KV element type's name as a namespace spells it ("fp32", "bf16", "fp16").
  virtual std::string kv_dtype() const = 0;
  // Tokens one step may hold at most (the backend's activation buffers).
  virtual int64_t max_step_tokens() const = 0;

  // Runs `batch` (forward_batch.h) and returns one token per entry: the chosen one where
  // samples[b].wanted, else -1. Returns once the step's work is complete, KV writes included:
  // KvBlocks::Commit hashes and publishes the blocks it filled next, from another stream or
  // process (a prefill chunk that samples nothing too: the 8B benchmark's T0-born blocks were
  // refused at T2 as changed after commit when it did not). Errors: the model's (InvalidArgument
  // for a bad batch) or the device's.
  virtual absl::StatusOr<std::vector<int32_t>> Step(std::span<const ChunkInput> batch,
                                                    std::span<const SampleSpec> samples) = 0;
};

}  // namespace kvtier::engine
