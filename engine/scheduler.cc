#include "engine/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace kvtier::engine {

absl::Status SchedulerOptions::Validate() const {
  if (max_running < 1) return absl::InvalidArgumentError("scheduler: max_running must be >= 1");
  if (max_step_tokens < 1) {
    return absl::InvalidArgumentError("scheduler: max_step_tokens must be >= 1");
  }
  if (max_model_len < 1) return absl::InvalidArgumentError("scheduler: max_model_len must be >= 1");
  if (room_patience_steps < 0) {
    return absl::InvalidArgumentError("scheduler: room_patience_steps must be >= 0");
  }
  return absl::OkStatus();
}

Scheduler::Scheduler(SchedulerOptions options, KvBlocks& blocks)
    : options_(std::move(options)), blocks_(blocks) {}

absl::Status Scheduler::Add(std::unique_ptr<Sequence> seq) {
  const int64_t prompt = seq->num_tokens();
  if (prompt == 0) return absl::InvalidArgumentError("request: the prompt is empty");
  if (seq->options().max_tokens < 1) {
    return absl::InvalidArgumentError("request: max_tokens must be >= 1");
  }
  if (prompt > options_.max_model_len) {
    return absl::InvalidArgumentError(
        fmt::format("request: the prompt has {} tokens; the context holds {} (max_model_len)",
                    prompt, options_.max_model_len));
  }
  // The last token is never computed: the most a sequence ever holds.
  const int64_t most = std::min(prompt + seq->options().max_tokens - 1, options_.max_model_len);
  if (blocks_.BlocksFor(most) > blocks_.num_slots()) {
    return absl::InvalidArgumentError(
        fmt::format("request: {} tokens need {} KV blocks; the pool has {}", most,
                    blocks_.BlocksFor(most), blocks_.num_slots()));
  }
  seq->set_status(SequenceStatus::kWaiting);
  waiting_.push_back(std::move(seq));
  return absl::OkStatus();
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  int64_t budget = options_.max_step_tokens;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    if (!ScheduleRunning(i, budget, plan)) break;
  }
  // A prefix admitted now would take slots of the tier the running sequences wait for.
  if (plan.preempted > 0 || plan.stalled > 0) {
    if (!waiting_.empty()) plan.held = AdmissionHeld::kRunningWait;
  } else {
    LookAhead(budget);
    blocks_.SetGrowthReserve(GrowthReserve());
    size_t next = 0;    // the first waiting sequence not passed over
    bool first = true;  // waiting_[next] is the one that was first when the step began
    while (next < waiting_.size()) {
      if (budget <= 0 || running_.size() >= static_cast<size_t>(options_.max_running)) {
        if (first) plan.held = AdmissionHeld::kLimit;
        break;
      }
      const AdmissionHeld a = AdmitWaiting(next, budget, plan);
      if (first) plan.held = a;  // the first one's: admitted (kNone) or why not
      first = false;
      if (a == AdmissionHeld::kPrefixLoading) {
        ++next;  // its prefix is on its way (and had room): it keeps its place
      } else if (a != AdmissionHeld::kNone) {
        break;
      } else if (next > 0) {
        ++stats_.admitted_past_loading;
      }
    }
  }
  if (plan.held != AdmissionHeld::kNone) ++stats_.held[static_cast<size_t>(plan.held)];
  plan.tokens = options_.max_step_tokens - budget;
  return plan;
}

bool Scheduler::ScheduleRunning(size_t i, int64_t& budget, StepPlan& plan) {
  Sequence& seq = *running_[i];
  const int64_t start = seq.num_computed_tokens();
  int64_t n = std::min(seq.num_tokens() - start, budget);
  int64_t need = blocks_.SlotsToGrow(seq, start + n);
  if (n > 1 && blocks_.MayMakeRoomLater() && !blocks_.CanTake(need)) {
    n = std::max<int64_t>(1, ChunkThatFits(seq, start, n));  // a prefill shrinks to the room first
    need = blocks_.SlotsToGrow(seq, start + n);
  }
  if (!blocks_.CanTake(need) && blocks_.GiveBackUnadmitted()) ++stats_.prefixes_given_back;
  if (!blocks_.CanTake(need) && blocks_.MayMakeRoomLater() &&
      seq.room_waits() < options_.room_patience_steps) {
    seq.set_room_waits(seq.room_waits() + 1);  // sits this step out; the others go on
    ++plan.stalled;
    return true;
  }
  while (!blocks_.CanTake(need) && running_.size() > i + 1) {
    PreemptLast();
    ++plan.preempted;
  }
  if (!blocks_.CanTake(need)) {  // it is the last one left to give way
    PreemptLast();
    ++plan.preempted;
    return false;
  }
  blocks_.Grow(seq, start + n);
  seq.set_room_waits(0);
  plan.chunks.push_back({.seq = &seq, .start = start, .n = n});
  budget -= n;
  return true;
}

void Scheduler::LookAhead(int64_t budget) const {
  if (waiting_.empty() || budget <= 0) return;
  if (running_.size() >= static_cast<size_t>(options_.max_running)) return;
  const size_t room = static_cast<size_t>(options_.max_running) - running_.size();
  std::vector<Sequence*> next;
  int64_t tokens = 0;
  for (size_t i = 0; i < waiting_.size() && i < room && i < kLookAhead && tokens < budget; ++i) {
    next.push_back(waiting_[i].get());
    tokens += waiting_[i]->num_tokens();
  }
  if (!next.empty()) blocks_.LookAhead(next);
}

AdmissionHeld Scheduler::AdmitWaiting(size_t i, int64_t& budget, StepPlan& plan) {
  Sequence& seq = *waiting_[i];
  const int64_t cached = blocks_.CachedPrefixBlocks(seq);
  if (cached == KvBlocks::kPrefixLoading) return AdmissionHeld::kPrefixLoading;
  if (cached == KvBlocks::kPrefixWaitsForRoom) return AdmissionHeld::kPrefixRoom;
  const int64_t start = cached * blocks_.block_tokens();
  int64_t n = std::min(seq.num_tokens() - start, budget);
  const int64_t spare = GrowthReserve();
  if (!blocks_.CanTake(blocks_.SlotsToAdmit(seq, cached, start + n) + spare)) {
    // Shrunk to what fits only when nothing runs or waits for a load (a prompt beyond the
    // working-slot quota): a sliver admitted beside running sequences grows into room they need,
    // and they preempt. (With nothing running there is no growth to reserve for.)
    if (!blocks_.MayMakeRoomLater() || !running_.empty() || i > 0) return AdmissionHeld::kRoom;
    n = ChunkThatFits(seq, start, n);  // the rest of the prompt in later steps
    if (n < 1 || !blocks_.CanTake(blocks_.SlotsToAdmit(seq, cached, start + n))) {
      return AdmissionHeld::kRoom;
    }
  }
  blocks_.Admit(seq, cached, start + n);
  if (seq.preemptions() == 0) seq.set_prompt_cached_tokens(start);  // its first admission
  stats_.cached_tokens += start;
  seq.set_status(SequenceStatus::kRunning);
  running_.push_back(std::move(waiting_[i]));
  waiting_.erase(waiting_.begin() + static_cast<ptrdiff_t>(i));
  plan.chunks.push_back({.seq = &seq, .start = start, .n = n});
  budget -= n;
  return AdmissionHeld::kNone;
}

int64_t Scheduler::ChunkThatFits(const Sequence& seq, int64_t start, int64_t n) const {
  const int64_t bt = blocks_.block_tokens();
  const int64_t held = static_cast<int64_t>(seq.block_table().size()) * bt - start;
  const int64_t fits = std::max<int64_t>(held, 0) + int64_t{blocks_.free_slots()} * bt;
  return std::min(n, fits);
}

int64_t Scheduler::GrowthReserve() const {
  if (!blocks_.MayMakeRoomLater()) return 0;
  const int64_t bt = blocks_.block_tokens();
  int64_t slots = 0;
  for (const std::unique_ptr<Sequence>& seq : running_) {
    const int64_t tokens = seq->num_tokens();
    if (static_cast<int64_t>(seq->block_table().size()) * bt < tokens) continue;  // prefilling
    slots += blocks_.SlotsToGrow(*seq, tokens + 1);
  }
  return slots;
}

void Scheduler::PreemptLast() {
  std::unique_ptr<Sequence> seq = std::move(running_.back());
  running_.pop_back();
  if (options_.on_preempt) options_.on_preempt(*seq);
  blocks_.Release(*seq);
  seq->set_status(SequenceStatus::kWaiting);
  seq->CountPreemption();
  ++stats_.preemptions;
  waiting_.push_front(std::move(seq));
}

void Scheduler::Update(const StepPlan& plan, std::span<const int32_t> sampled) {
  ++stats_.steps;
  for (const ScheduledChunk& chunk : plan.chunks) {
    chunk.seq->AddComputedTokens(chunk.n);
    stats_.computed_tokens += chunk.n;
    blocks_.Commit(*chunk.seq, chunk.start);
  }
  blocks_.EndStep();  // the step's blocks entered at once, before a finished sequence releases
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const ScheduledChunk& chunk = plan.chunks[c];
    Sequence& seq = *chunk.seq;
    if (!chunk.samples()) continue;
    seq.AppendToken(sampled[c]);
    const FinishReason reason = StopReason(seq, sampled[c]);
    if (reason == FinishReason::kNone) continue;
    auto it = std::find_if(running_.begin(), running_.end(),
                           [&](const std::unique_ptr<Sequence>& s) { return s.get() == &seq; });
    FinishRunning(static_cast<size_t>(it - running_.begin()), reason);
  }
}

FinishReason Scheduler::StopReason(const Sequence& seq, int32_t token) const {
  const RequestOptions& o = seq.options();
  auto in = [token](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  if ((!o.ignore_eos && in(options_.eos_token_ids)) || in(o.stop_token_ids)) {
    return FinishReason::kStop;
  }
  if (seq.num_completion_tokens() >= o.max_tokens || seq.num_tokens() >= options_.max_model_len) {
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

void Scheduler::FinishRunning(size_t i, FinishReason reason) {
  std::unique_ptr<Sequence> seq = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  blocks_.Release(*seq);
  seq->Finish(reason);
  finished_.push_back(std::move(seq));
}

bool Scheduler::Cancel(uint64_t id) {
  auto has_id = [id](const std::unique_ptr<Sequence>& s) { return s->id() == id; };
  if (auto it = std::find_if(running_.begin(), running_.end(), has_id); it != running_.end()) {
    FinishRunning(static_cast<size_t>(it - running_.begin()), FinishReason::kCancelled);
    return true;
  }
  auto it = std::find_if(waiting_.begin(), waiting_.end(), has_id);
  if (it == waiting_.end()) return false;
  std::unique_ptr<Sequence> seq = std::move(*it);
  waiting_.erase(it);
  blocks_.Release(*seq);  // what a "can I" call may have prepared for it (a leased prefix)
  seq->Finish(FinishReason::kCancelled);
  finished_.push_back(std::move(seq));
  return true;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::TakeFinished() {
  return std::exchange(finished_, {});
}

}  // namespace kvtier::engine
