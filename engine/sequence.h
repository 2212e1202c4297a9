// One request as the runtime sees it (nano-vllm's Sequence): its tokens — the prompt, then each
// token generated — how many of them have their K/V in the pool, its block table, the keys of its
// full blocks, its stop conditions and where it is in its life:
//
//   waiting --(admitted by the scheduler)--> running --(stop, length, cancel)--> finished
//      ^                                        |
//      +----------(preempted: blocks freed)-----+
//
// A step computes tokens [num_computed_tokens, num_computed_tokens + n) of a running sequence: a
// prefill chunk, or the decode of the last token (n = 1). When a step computes its last token, its
// logits choose the next one, which is appended. So prefill and decode are one thing here, and a
// preempted sequence resumes by recomputing (or finding cached) everything but its last token.
//
// Thread-safety: not thread-safe; owned by the scheduler, mutated by it and the block manager.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "index/block_key.h"
#include "kernels/ops/sampling.h"

namespace kvtier::engine {

// What a request asks for besides its prompt.
struct RequestOptions {
  int32_t max_tokens = 16;              // new tokens at most (>= 1)
  ops::SamplingParams sampling;         // temperature 0: greedy
  bool ignore_eos = false;              // else stop after a token in the model's eos ids
  std::vector<int32_t> stop_token_ids;  // stop after any of these (included in the output)
};

enum class SequenceStatus { kWaiting, kRunning, kFinished };

// Where cached prompt tokens came from: the engine's private prefix cache (BlockManager), or the
// kvtierd tier the lookup found the block in (DaemonKvBlocks; the highest one when several hold
// it; a T2 or T3 block is promoted before the engine reads it, but it is counted where it was
// found: T3 is kvtierd's remote tier, a store the daemons of a fleet share).
enum class CacheSource : uint8_t { kEngine = 0, kT0 = 1, kT1 = 2, kT2 = 3, kT3 = 4 };
inline constexpr size_t kCacheSources = 5;
using CachedBySource = std::array<int64_t, kCacheSources>;
// By CacheSource: the names metrics and usage give each source.
inline constexpr std::array<const char*, kCacheSources> kCacheSourceNames = {"engine", "t0", "t1",
                                                                             "t2", "t3"};

enum class FinishReason {
  kNone,       // not finished
  kStop,       // an eos or stop token (the last token of the output)
  kLength,     // max_tokens, or the context limit
  kCancelled,  // Scheduler::Cancel
};

const char* FinishReasonName(FinishReason reason);

class Sequence {
 public:
  // Precondition: prompt is not empty.
  Sequence(uint64_t id, std::vector<int32_t> prompt, RequestOptions options);

  uint64_t id() const { return id_; }
  const RequestOptions& options() const { return options_; }
  SequenceStatus status() const { return status_; }
  FinishReason finish_reason() const { return finish_reason_; }

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int64_t num_completion_tokens() const { return num_tokens() - num_prompt_tokens_; }
  std::span<const int32_t> completion() const {
    return std::span<const int32_t>(tokens_).subspan(num_prompt_tokens_);
  }

  // Tokens whose K/V is in the pool at block_table() (computed, or found in the prefix cache).
  int64_t num_computed_tokens() const { return num_computed_tokens_; }
  const std::vector<int32_t>& block_table() const { return block_table_; }

  // Statistics over the sequence's life: tokens taken from the prefix cache at admissions, tokens
  // run through the model (recomputation after preemption included), and preemptions.
  int64_t cached_tokens() const { return cached_tokens_; }
  // Of those, the ones taken at the first admission: the prompt tokens the cache saved this
  // request (what an OpenAI client's usage.prompt_tokens_details.cached_tokens means).
  int64_t prompt_cached_tokens() const { return prompt_cached_tokens_; }
  // prompt_cached_tokens() by where the cache held them (indexed by CacheSource).
  const CachedBySource& prompt_cached_from() const { return prompt_cached_from_; }
  int64_t model_tokens() const { return model_tokens_; }
  int32_t preemptions() const { return preemptions_; }

  // The key of full block i (i < num_tokens() / block_tokens), chained from `root`; computed once
  // and kept, since a sequence's tokens never change once there. Every call passes the same
  // block_tokens and root (its block manager's).
  const BlockKey& BlockKeyAt(int64_t i, int64_t block_tokens, const BlockKey& root);

  // ---- For the scheduler and the block manager. ----
  void set_status(SequenceStatus status) { status_ = status; }
  void Finish(FinishReason reason) {
    status_ = SequenceStatus::kFinished;
    finish_reason_ = reason;
  }
  void AppendToken(int32_t token) { tokens_.push_back(token); }
  std::vector<int32_t>& mutable_block_table() { return block_table_; }
  // `n` tokens found in the prefix cache, where `from` says, were attached.
  void AddCachedTokens(int64_t n, CacheSource from = CacheSource::kEngine) {
    num_computed_tokens_ += n;
    cached_tokens_ += n;
    admission_cached_from_[static_cast<size_t>(from)] += n;
  }
  // A step computed `n` more tokens.
  void AddComputedTokens(int64_t n) {
    num_computed_tokens_ += n;
    model_tokens_ += n;
  }
  // Blocks released (preemption): nothing is in the pool any more.
  void ResetComputed() {
    num_computed_tokens_ = 0;
    admission_cached_from_ = {};
  }
  void CountPreemption() { ++preemptions_; }
  // Consecutive steps the sequence sat out waiting for a KV slot the daemon may free (Scheduler).
  int32_t room_waits() const { return room_waits_; }
  void set_room_waits(int32_t n) { room_waits_ = n; }
  // The scheduler admitted the sequence for the first time with `n` tokens from the cache.
  void set_prompt_cached_tokens(int64_t n) {
    prompt_cached_tokens_ = n;
    prompt_cached_from_ = admission_cached_from_;
  }

 private:
  uint64_t id_;
  RequestOptions options_;
  std::vector<int32_t> tokens_;
  int64_t num_prompt_tokens_;
  SequenceStatus status_ = SequenceStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
  int64_t num_computed_tokens_ = 0;
  std::vector<int32_t> block_table_;  // slot of block j
  std::vector<BlockKey> block_keys_;  // keys of the first full blocks, filled by BlockKeyAt
  int64_t cached_tokens_ = 0;
  int64_t prompt_cached_tokens_ = 0;
  CachedBySource admission_cached_from_{};  // cached tokens of the current admission, by source
  CachedBySource prompt_cached_from_{};
  int64_t model_tokens_ = 0;
  int32_t preemptions_ = 0;
  int32_t room_waits_ = 0;
};

}  // namespace kvtier::engine
