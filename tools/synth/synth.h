// A seeded workload generator for prefix-cache studies, producing requests in the Mooncake trace
// shape (DESIGN.md "Trace replay"). Three kinds of traffic, mixed by fraction:
//
//   chat   multi-turn sessions: turn n's prompt is turn n-1's prompt + its answer + new user text,
//          so its hash ids extend the previous turn's chain. Each session opens with a shared
//          system prompt drawn with Zipf popularity.
//   rag    one-shot requests: a system prompt and 1-4 documents, each drawn with Zipf popularity
//          (popular pairs share prefixes), then a unique question.
//   agent  long contexts (a tool prompt and a long task) re-read at every step with a small
//          append (the previous step's output and a tool observation).
//
// Hash ids are prefix-chained exactly like real traces: a block's id is interned from (its
// parent's id, the identity of its tokens), so equal ids <=> equal block content after an equal
// prefix; ids are numbered 0, 1, 2, ... in first-seen order. The last id of a request covers its
// partial last block, so len(hash_ids) == ceil(input_length / block_tokens).
//
// Reproducible: the same config (seed included) gives the same requests on every platform.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::synth {

struct SynthConfig {
  uint64_t seed = 1;
  uint64_t requests = 10000;
  uint32_t block_tokens = 512;  // Mooncake's convention
  // Traffic mix; normalised, so only the ratios matter.
  double chat_fraction = 0.6;
  double rag_fraction = 0.25;
  double agent_fraction = 0.15;
  double zipf_alpha = 1.0;        // popularity skew of system prompts and documents
  uint32_t sessions = 200;        // chat sessions open at once
  uint32_t agents = 16;           // agent sessions open at once
  uint32_t system_prompts = 50;   // distinct system (and tool) prompts
  uint32_t documents = 2000;      // distinct RAG documents
  double mean_turns = 6;          // chat session length, geometric
  double mean_agent_steps = 20;   // agent session length, geometric
  double rate = 5;                // requests per second, Poisson arrivals
  uint32_t max_context = 131072;  // tokens; a session whose next prompt would exceed it ends

  // InvalidArgument naming the `kvtier synth` flag of the first bad field.
  absl::Status Validate() const;
};

enum class RequestKind { kChat, kRag, kAgent };

struct SynthRequest {
  uint64_t timestamp_ms = 0;
  uint32_t input_length = 0;
  uint32_t output_length = 0;
  std::vector<uint64_t> hash_ids;  // ceil(input_length / block_tokens) ids
  RequestKind kind = RequestKind::kChat;
};

class WorkloadGenerator {
 public:
  // `config` must be valid (Validate()); it is copied.
  explicit WorkloadGenerator(const SynthConfig& config);
  ~WorkloadGenerator();
  WorkloadGenerator(const WorkloadGenerator&) = delete;
  WorkloadGenerator& operator=(const WorkloadGenerator&) = delete;

  // Generates the next request into *request (its hash_ids buffer is reused).
  void Next(SynthRequest* request);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Appends `request` as one Mooncake JSON line, "\n" included, to *out:
// {"timestamp": 12, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}
void AppendMooncakeLine(const SynthRequest& request, std::string* out);

}  // namespace kvtier::synth
