// A Hugging Face model directory with random weights at a real architecture, for trying the engine
// without downloading weights (`kvtier make-model`). Its text is meaningless: the weights are
// noise (normal, std 0.02; norms 1; biases 0), but every file is what save_pretrained writes and
// the engine reads it through the same loader as a real checkpoint:
//   config.json              the architecture and sizes, dtype bfloat16, vocab_size = the
//   tokenizer's generation_config.json   bos/eos ids from the tokenizer (greedy: no do_sample)
//   model.safetensors        bf16, the tensors engine/weights.h ExpectedWeights names
//   tokenizer.json, tokenizer_config.json (and chat_template.jinja if any), copied
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "engine/model_config.h"

namespace kvtier::generate {

struct RandomModelOptions {
  std::string out_dir;        // created if missing; existing model files in it are replaced
  std::string tokenizer_dir;  // holds tokenizer.json + tokenizer_config.json
  engine::Architecture architecture = engine::Architecture::kQwen3;
  uint32_t layers = 2;
  uint32_t hidden = 64;
  uint32_t heads = 4;
  uint32_t kv_heads = 2;
  uint32_t head_dim = 0;      // 0: hidden / heads
  uint32_t intermediate = 0;  // 0: 3 * hidden
  uint32_t max_position = 4096;
  uint32_t sliding_window = 0;  // Mistral only; 0: none
  bool tie_embeddings = true;
  uint64_t seed = 0;
};

struct RandomModelSummary {
  engine::ModelConfig config;  // as the engine reads the written config.json back
  uint64_t parameters = 0;
  uint64_t safetensors_bytes = 0;
};

// Writes the directory. Errors name the file (an unreadable tokenizer, a config the engine would
// refuse, e.g. sizes that do not divide: the written config is read back and checked).
absl::StatusOr<RandomModelSummary> WriteRandomModel(const RandomModelOptions& options);

}  // namespace kvtier::generate
