// Continuous batching (nano-vllm's Scheduler, with chunked prefill mixed into decode steps): which
// sequences run in the next step and how many of their tokens, under a per-step token budget.
//
// Each step, in order:
//  1. Running sequences, oldest admission first, each get what they have left to compute — one
//     token for a decode, the rest of the prompt (up to the budget left) for a chunked prefill.
//     When the pool cannot hold a sequence's next tokens, the most recently admitted running
//     sequence is preempted (its blocks released, back to the front of the waiting queue), until
//     the sequence fits or is itself the one preempted.
//     A running sequence that cannot grow first takes back what a waiting sequence's prefix holds
//     (KvBlocks::GiveBackUnadmitted: running sequences come before waiting ones, and a leased
//     prefix that was not admitted must not push them out).
//     On KV blocks that may make room later (the daemon's tier: KvBlocks::MayMakeRoomLater), a
//     running sequence that still cannot grow sits out up to room_patience_steps while the
//     others run (the daemon frees unleased blocks meanwhile), and only then preempts: a
//     preempted sequence's resumption promotes its whole prefix back into the tier, so
//     preempting at the first shortage thrashed (docs/benchmarks.md, the trace served on kvtierd).
//  2. If nothing was preempted and no running sequence sat out, waiting sequences are admitted
//     first come, first served while the budget, max_running and the pool allow: cached prefix
//     blocks are attached (those tokens are not computed) and the first chunk of the rest is
//     scheduled. A sequence that does not fit, or whose prefix waits for room to be promoted
//     into the pool (KvBlocks::kPrefixWaitsForRoom), stops admission. One whose prefix is on its
//     way into the pool (KvBlocks::kPrefixLoading: a load in flight, from a lower tier) keeps
//     its place, and those behind it may be admitted meanwhile: a prefix read from a disk takes
//     longer than the short prompts behind it take to run (vLLM passes over requests waiting for
//     remote KV the same way). Its load started only with room for it and a first chunk beside
//     the running sequences; if those admitted meanwhile took that room, it waits for room once
//     loaded, and then nothing passes it.
//     On KV blocks that may make room later, a first chunk that does not fit whole shrinks to the
//     slots there are only when nothing runs (a prompt beyond the daemon's working-slot quota);
//     beside running sequences it waits, as on a private pool.
//     On KV blocks that may make room later, an admission also leaves the slots the running
//     sequences' next tokens need (GrowthReserve): a prefix promoted from T1 or T2 takes slots of
//     the tier that the admission check of its working slots alone does not see, and taking the
//     last of them would stall the decodes at their next block.
// Every admission takes at least a token of a step's budget, and only budget the running sequences
// left: so no more sequences run than max_step_tokens, and every running one gets a token of
// every step. A sequence with prefill left takes all the budget left, so at most one is mid-prefill
// at a time, the latest admitted: decodes come first in every step.
// After the step ran, Update advances each sequence, enters its newly full blocks into the prefix
// cache, appends the sampled token where a sequence computed its last token, and finishes those
// that hit a stop condition. Preemption here is "free and recompute later" (what it frees stays in
// the prefix cache until evicted, so a resumed sequence often finds its own blocks); the daemon's
// offload plugs in at `on_preempt`.
//
// Thread-safety: not thread-safe; one owner (the engine loop). Add and Cancel between steps.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/kv_blocks.h"
#include "engine/sequence.h"

namespace kvtier::engine {

// Steps a running sequence sits out waiting for a slot KV blocks may free later, by default.
inline constexpr int32_t kDefaultRoomPatienceSteps = 16;

struct SchedulerOptions {
  int32_t max_running = 64;            // sequences in the running batch at most
  int64_t max_step_tokens = 512;       // tokens computed per step at most: decodes + prefill chunks
  int64_t max_model_len = 2048;        // tokens of one sequence at most, prompt and output
  std::vector<int32_t> eos_token_ids;  // the model's
  // Where the KV blocks may make room later: steps a running sequence that cannot grow sits out
  // before the latest admission is preempted (0: at once, as on a private pool).
  int32_t room_patience_steps = kDefaultRoomPatienceSteps;
  // Called with a sequence about to be preempted, before its blocks are released: the seam where
  // its computed blocks will be published to the daemon instead of recomputed. Empty: none.
  std::function<void(const Sequence&)> on_preempt;

  // OK, or InvalidArgument naming the first non-positive limit (room_patience_steps: negative).
  absl::Status Validate() const;
};

// One sequence's share of a step: tokens [start, start + n) of it.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;
  int64_t n = 0;
  // The step computes the sequence's last token: its logits choose the next one.
  bool samples() const { return start + n == seq->num_tokens(); }
};

// Why the first waiting sequence was not admitted in a step (kNone: it was, or none waited).
enum class AdmissionHeld : uint8_t {
  kNone,
  kRunningWait,    // a running sequence sat out or was preempted: nothing is admitted in the step
  kLimit,          // no token budget left, or max_running sequences run
  kPrefixLoading,  // its prefix is on its way into the pool (those behind it may be admitted)
  kPrefixRoom,     // its prefix waits for room in the pool to load
  kRoom,           // its first chunk does not fit in the pool
};
inline constexpr size_t kAdmissionHeldReasons = 6;

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // running order: older admissions first
  int64_t tokens = 0;                  // sum of the chunks' n
  int32_t preempted = 0;               // sequences preempted while planning
  int32_t stalled = 0;  // running sequences sitting this step out, waiting for the daemon's room
  AdmissionHeld held = AdmissionHeld::kNone;
  bool empty() const { return chunks.empty(); }
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t computed_tokens = 0;  // run through the model
  int64_t cached_tokens = 0;    // taken from the prefix cache at admission
  int64_t preemptions = 0;
  int64_t prefixes_given_back = 0;    // waiting prefixes given back for a running sequence's room
  int64_t admitted_past_loading = 0;  // admissions past a sequence whose prefix was loading
  // Steps whose first waiting sequence was not admitted, by StepPlan::held.
  std::array<int64_t, kAdmissionHeldReasons> held{};
};

class Scheduler {
 public:
  // `blocks` must outlive the scheduler. Precondition: options.Validate() is OK.
  Scheduler(SchedulerOptions options, KvBlocks& blocks);

  // Queues `seq` (waiting, holding no slots). InvalidArgument when it could never run: an empty
  // prompt, max_tokens < 1, a prompt over max_model_len, or more tokens to hold than the whole pool
  // (its prompt and output but the last token, capped at max_model_len).
  absl::Status Add(std::unique_ptr<Sequence> seq);

  // The next step (empty when nothing waits or runs). Grows the scheduled sequences' block tables
  // for the step's tokens; their num_computed_tokens move only in Update.
  StepPlan Schedule();

  // After `plan` ran: sampled[i] is the token chosen for plan.chunks[i] when it samples() (ignored
  // otherwise). Finished sequences are released and moved to TakeFinished().
  void Update(const StepPlan& plan, std::span<const int32_t> sampled);

  // Finishes sequence `id` (waiting or running) as kCancelled, releasing its slots. False if no
  // unfinished sequence has that id.
  bool Cancel(uint64_t id);

  // Sequences finished since the last call, in the order they finished.
  std::vector<std::unique_ptr<Sequence>> TakeFinished();

  bool idle() const { return waiting_.empty() && running_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  // Step 1 for running_[i]; false when it was preempted itself (nothing more runs this step).
  bool ScheduleRunning(size_t i, int64_t& budget, StepPlan& plan);
  // Step 2 for waiting_[i], the sequences before it passed over (their prefixes loading): kNone
  // when it was admitted, else why not.
  AdmissionHeld AdmitWaiting(size_t i, int64_t& budget, StepPlan& plan);
  // Moves running_.back() to the front of waiting_, its blocks released.
  // Tells the KV blocks which waiting sequences this step may admit, so a daemon looks them up in
  // one round trip: from the front, until their prompts fill the step's token budget (a cached
  // prefix may let more in; those are looked up one by one), at most kLookAhead and no more than
  // max_running leaves room for.
  void LookAhead(int64_t budget) const;
  static constexpr size_t kLookAhead = 64;
  // The longest part of an n-token chunk of seq from `start` on that the slots it holds and
  // free_slots() can take (0 when none). Used where the KV blocks may make room later (a daemon):
  // a prefill larger than what it can have at once (its working-slot quota, say) runs in smaller
  // chunks, its published blocks leaving the quota, instead of waiting for room that never comes.
  // Tokens of `seq` from `start`, at most n, that its slots and the free slots hold.
  int64_t ChunkThatFits(const Sequence& seq, int64_t start, int64_t n) const;
  // Slots the running sequences that hold their whole context need for the token after this
  // step's (a decode whose last block is full); 0 on KV blocks that never make room later.
  int64_t GrowthReserve() const;
  void PreemptLast();
  // After `token` was appended to `seq`: the reason to stop, or kNone.
  FinishReason StopReason(const Sequence& seq, int32_t token) const;
  // Moves running_[i] to finished_.
  void FinishRunning(size_t i, FinishReason reason);

  SchedulerOptions options_;
  KvBlocks& blocks_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  std::vector<std::unique_ptr<Sequence>> finished_;
  SchedulerStats stats_;
};

}  // namespace kvtier::engine
