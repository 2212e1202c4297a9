// The scheduler without a model: what each step runs (budget, chunked prefill mixed with decodes,
// FCFS, limits), preemption when the pool runs short, cancellation, stop conditions and prefix
// hits. A step's "model" answers token 100 + (the sequence's output length) for every sample.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <utility>

#include "engine/block_manager.h"

namespace kvtier::engine {
namespace {

constexpr int64_t kBt = 4;

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(int32_t slots, SchedulerOptions options) {
    blocks_ = std::make_unique<BlockManager>(slots, kBt, BlockKey{});
    ASSERT_TRUE(options.Validate().ok());
    scheduler_ = std::make_unique<Scheduler>(std::move(options), *blocks_);
  }

  absl::Status Add(uint64_t id, int64_t prompt, RequestOptions options = {}, int32_t first = 0) {
    std::vector<int32_t> t(prompt);
    std::iota(t.begin(), t.end(), first);
    return scheduler_->Add(std::make_unique<Sequence>(id, std::move(t), std::move(options)));
  }

  // One step; returns (sequence id, chunk n) in plan order.
  std::vector<std::pair<uint64_t, int64_t>> Step() {
    const StepPlan plan = scheduler_->Schedule();
    std::vector<std::pair<uint64_t, int64_t>> ran;
    std::vector<int32_t> sampled;
    for (const ScheduledChunk& c : plan.chunks) {
      ran.emplace_back(c.seq->id(), c.n);
      sampled.push_back(100 + static_cast<int32_t>(c.seq->num_completion_tokens()));
    }
    scheduler_->Update(plan, sampled);
    for (auto& seq : scheduler_->TakeFinished()) finished_[seq->id()] = std::move(seq);
    return ran;
  }

  using Ran = std::vector<std::pair<uint64_t, int64_t>>;
  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<uint64_t, std::unique_ptr<Sequence>> finished_;
};

// Options with the given limits (0: the default) and eos ids.
SchedulerOptions Opts(int64_t step_tokens, int32_t max_running = 0, int64_t max_model_len = 0,
                      std::vector<int32_t> eos = {}) {
  SchedulerOptions o;
  o.max_step_tokens = step_tokens;
  if (max_running > 0) o.max_running = max_running;
  if (max_model_len > 0) o.max_model_len = max_model_len;
  o.eos_token_ids = std::move(eos);
  return o;
}

RequestOptions MaxTokens(int32_t n) {
  RequestOptions o;
  o.max_tokens = n;
  return o;
}

TEST_F(SchedulerTest, LongPromptIsPrefilledInChunksOfTheBudget) {
  Make(64, Opts(8));
  ASSERT_TRUE(Add(1, 20, MaxTokens(2)).ok());
  EXPECT_EQ(Step(), (Ran{{1, 8}}));
  EXPECT_EQ(Step(), (Ran{{1, 8}}));
  EXPECT_EQ(Step(), (Ran{{1, 4}}));  // samples the first token
  EXPECT_EQ(Step(), (Ran{{1, 1}}));  // the decode of it samples the second: done
  ASSERT_TRUE(finished_.count(1));
  EXPECT_EQ(
      std::vector<int32_t>(finished_[1]->completion().begin(), finished_[1]->completion().end()),
      (std::vector<int32_t>{100, 101}));
  EXPECT_EQ(finished_[1]->finish_reason(), FinishReason::kLength);
  EXPECT_TRUE(scheduler_->idle());
  EXPECT_EQ(blocks_->free_slots(), 64);
}

TEST_F(SchedulerTest, DecodesGoFirstAndPrefillChunksFillTheBudget) {
  Make(64, Opts(8));
  ASSERT_TRUE(Add(1, 3, MaxTokens(10)).ok());
  EXPECT_EQ(Step(), (Ran{{1, 3}}));
  ASSERT_TRUE(Add(2, 20, MaxTokens(10)).ok());
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 7}}));
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 7}}));
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 6}}));
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 1}}));
}

TEST_F(SchedulerTest, WaitingRequestsAreAdmittedFirstComeFirstServed) {
  // 6 slots: the first request holds 4; the second needs 3 and blocks the third, which would fit.
  Make(6, Opts(64));
  ASSERT_TRUE(Add(1, 16, MaxTokens(1)).ok());
  ASSERT_TRUE(Add(2, 12, MaxTokens(1), 200).ok());
  ASSERT_TRUE(Add(3, 2, MaxTokens(1)).ok());
  EXPECT_EQ(Step(), (Ran{{1, 16}}));
  EXPECT_EQ(Step(), (Ran{{2, 12}, {3, 2}}));
}

TEST_F(SchedulerTest, RunningSequencesAreLimited) {
  Make(64, Opts(64, 2));
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(Add(id, 2, MaxTokens(2)).ok());
  EXPECT_EQ(Step(), (Ran{{1, 2}, {2, 2}}));
  EXPECT_EQ(scheduler_->num_waiting(), 1u);
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 1}}));  // both finish
  EXPECT_EQ(Step(), (Ran{{3, 2}}));
}

TEST_F(SchedulerTest, EveryRunningSequenceDecodesEveryStep) {
  // A budget of 4 tokens admits at most 4 sequences, so none of them waits a step for its decode.
  Make(64, Opts(4));
  for (uint64_t id = 1; id <= 6; ++id) ASSERT_TRUE(Add(id, 1, MaxTokens(3)).ok());
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  EXPECT_EQ(scheduler_->num_running(), 4u);
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));  // all four finish
  EXPECT_EQ(Step(), (Ran{{5, 1}, {6, 1}}));
}

TEST_F(SchedulerTest, ContextLimitRefusesLongPromptsAndEndsOutputs) {
  Make(64, Opts(64, 0, 10));
  EXPECT_EQ(Add(1, 11).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Add(2, 8, MaxTokens(100)).ok());
  Step();
  Step();
  ASSERT_TRUE(finished_.count(2));
  EXPECT_EQ(finished_[2]->num_tokens(), 10);
  EXPECT_EQ(finished_[2]->finish_reason(), FinishReason::kLength);
}

TEST_F(SchedulerTest, RequestLargerThanThePoolIsRefused) {
  Make(4, Opts(64));
  EXPECT_TRUE(Add(1, 14, MaxTokens(3)).ok());  // 16 tokens held at most
  EXPECT_EQ(Add(2, 14, MaxTokens(4)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Add(3, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Add(4, 3, MaxTokens(0)).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SchedulerTest, ShortPoolPreemptsTheLatestAdmissionWhichResumesLater) {
  // 4 slots of 4 tokens. Two sequences of 6 tokens hold 2 slots each; the first decode that needs
  // a third slot preempts the other.
  Make(4, Opts(64));
  ASSERT_TRUE(Add(1, 6, MaxTokens(6)).ok());
  ASSERT_TRUE(Add(2, 6, MaxTokens(6), 50).ok());
  EXPECT_EQ(Step(), (Ran{{1, 6}, {2, 6}}));  // 7 tokens each, 6 computed
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 1}}));
  EXPECT_EQ(Step(), (Ran{{1, 1}, {2, 1}}));  // 9 tokens each, 8 computed: 2 full blocks
  EXPECT_EQ(Step(), (Ran{{1, 1}}));          // 1 needs a third slot: 2 is preempted
  EXPECT_EQ(scheduler_->stats().preemptions, 1);
  EXPECT_EQ(scheduler_->num_waiting(), 1u);
  while (!finished_.count(1)) Step();
  // 2 comes back with 9 tokens: its first block is still cached (the second was evicted for 1).
  EXPECT_EQ(Step(), (Ran{{2, 5}}));
  while (!scheduler_->idle()) Step();
  const Sequence& two = *finished_[2];
  EXPECT_EQ(two.preemptions(), 1);
  EXPECT_EQ(two.cached_tokens(), 4);
  EXPECT_EQ(std::vector<int32_t>(two.completion().begin(), two.completion().end()),
            (std::vector<int32_t>{100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(blocks_->free_slots(), 4);
}

TEST_F(SchedulerTest, PreemptionCallsTheOffloadSeamFirst) {
  std::vector<uint64_t> offered;
  SchedulerOptions options = Opts(64);
  options.on_preempt = [&](const Sequence& s) {
    offered.push_back(s.id());
    EXPECT_FALSE(s.block_table().empty());  // its blocks are still there to publish
  };
  Make(4, std::move(options));
  ASSERT_TRUE(Add(1, 6, MaxTokens(6)).ok());
  ASSERT_TRUE(Add(2, 6, MaxTokens(6), 50).ok());
  for (int i = 0; i < 4; ++i) Step();
  EXPECT_EQ(offered, (std::vector<uint64_t>{2}));
}

TEST_F(SchedulerTest, CancelFreesWaitingAndRunningRequests) {
  Make(8, Opts(64));
  ASSERT_TRUE(Add(1, 10, MaxTokens(20)).ok());
  ASSERT_TRUE(Add(2, 30, MaxTokens(2)).ok());  // waits: needs 8 slots
  Step();
  EXPECT_EQ(scheduler_->num_waiting(), 1u);
  EXPECT_TRUE(scheduler_->Cancel(2));
  EXPECT_TRUE(scheduler_->Cancel(1));
  EXPECT_FALSE(scheduler_->Cancel(1));
  EXPECT_FALSE(scheduler_->Cancel(9));
  EXPECT_TRUE(scheduler_->idle());
  EXPECT_EQ(blocks_->free_slots(), 8);
  std::vector<std::unique_ptr<Sequence>> done = scheduler_->TakeFinished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0]->id(), 2u);
  EXPECT_EQ(done[0]->finish_reason(), FinishReason::kCancelled);
  EXPECT_EQ(done[1]->num_completion_tokens(), 1);
}

TEST_F(SchedulerTest, StopsAtEosAndStopTokensUnlessEosIsIgnored) {
  Make(64, Opts(64, 0, 0, {102}));
  ASSERT_TRUE(Add(1, 3, MaxTokens(10)).ok());
  RequestOptions ignore = MaxTokens(10);
  ignore.ignore_eos = true;
  ASSERT_TRUE(Add(2, 3, ignore).ok());
  RequestOptions stop = MaxTokens(10);
  stop.stop_token_ids = {101};
  ASSERT_TRUE(Add(3, 3, stop).ok());
  while (!scheduler_->idle()) Step();
  EXPECT_EQ(finished_[1]->num_completion_tokens(), 3);  // 100 101 102
  EXPECT_EQ(finished_[1]->finish_reason(), FinishReason::kStop);
  EXPECT_EQ(finished_[2]->num_completion_tokens(), 10);
  EXPECT_EQ(finished_[2]->finish_reason(), FinishReason::kLength);
  EXPECT_EQ(finished_[3]->num_completion_tokens(), 2);  // 100 101
  EXPECT_EQ(finished_[3]->finish_reason(), FinishReason::kStop);
}

TEST_F(SchedulerTest, PrefixHitsSkipCachedTokens) {
  Make(64, Opts(64));
  ASSERT_TRUE(Add(1, 18, MaxTokens(1)).ok());
  EXPECT_EQ(Step(), (Ran{{1, 18}}));
  ASSERT_TRUE(Add(2, 13, MaxTokens(1)).ok());  // the same first 13 tokens: 3 blocks cached
  EXPECT_EQ(Step(), (Ran{{2, 1}}));
  ASSERT_TRUE(Add(3, 12, MaxTokens(1)).ok());  // 3 full blocks, the last recomputed
  EXPECT_EQ(Step(), (Ran{{3, 4}}));
  EXPECT_EQ(scheduler_->stats().cached_tokens, 20);
  EXPECT_EQ(scheduler_->stats().computed_tokens, 18 + 1 + 4);
}

TEST_F(SchedulerTest, ChunkedPrefillPublishesEachChunksFullBlocks) {
  Make(64, Opts(6));
  ASSERT_TRUE(Add(1, 20, MaxTokens(1)).ok());
  Step();  // tokens 0..5: block 0 full
  EXPECT_EQ(blocks_->cached_blocks(), 1);
  Step();  // 6..11: blocks 1, 2
  EXPECT_EQ(blocks_->cached_blocks(), 3);
}

}  // namespace
}  // namespace kvtier::engine

namespace kvtier::engine {
namespace {

// KV blocks like the daemon's: slots it holds back now may come later (MayMakeRoomLater), as
// kvtierd frees unleased blocks of its tier. A private pool of `slots` with `withheld` of them
// not to be had until the test gives them.
class RoomLaterBlocks final : public KvBlocks {
 public:
  RoomLaterBlocks(int32_t slots, int32_t withheld)
      : pool_(slots, kBt, BlockKey{}), withheld_(withheld) {}
  void Give() { withheld_ = 0; }
  // The next `n` prefix questions about sequence `id` answer `answer` (kPrefixLoading: a prefix on
  // its way into the pool; kPrefixWaitsForRoom: one waiting for room to start).
  void LoadFor(uint64_t id, int n, int64_t answer = kPrefixLoading) {
    loading_id_ = id;
    loading_ = n;
    loading_answer_ = answer;
  }
  // Each prefix question of a sequence with this id leases `slots` of the free ones (a prefix
  // promoted into the tier) until GiveBackUnadmitted or its admission.
  void LeasePrefixOf(uint64_t id, int32_t slots) {
    leasing_id_ = id;
    lease_slots_ = slots;
  }
  bool GiveBackUnadmitted() override {
    if (leased_ == 0) return false;
    withheld_ -= std::exchange(leased_, 0);
    return true;
  }
  int64_t block_tokens() const override { return pool_.block_tokens(); }
  int32_t num_slots() const override { return pool_.num_slots(); }
  int32_t free_slots() const override { return pool_.free_slots() - withheld_; }
  int64_t CachedPrefixBlocks(Sequence& seq) override {
    if (seq.id() == loading_id_ && loading_ > 0) {
      --loading_;
      return loading_answer_;
    }
    if (seq.id() == leasing_id_ && leased_ == 0) {
      leased_ = lease_slots_;
      withheld_ += leased_;
    }
    return pool_.CachedPrefixBlocks(seq);
  }
  int64_t SlotsToAdmit(Sequence& seq, int64_t cached, int64_t end) override {
    return pool_.SlotsToAdmit(seq, cached, end);
  }
  int64_t SlotsToGrow(const Sequence& seq, int64_t end) const override {
    return pool_.SlotsToGrow(seq, end);
  }
  bool CanTake(int64_t slots) override { return free_slots() >= slots; }
  void Admit(Sequence& seq, int64_t cached, int64_t end) override {
    if (seq.id() == leasing_id_) withheld_ -= std::exchange(leased_, 0);  // its own now
    pool_.Admit(seq, cached, end);
  }
  void Grow(Sequence& seq, int64_t end) override { pool_.Grow(seq, end); }
  void Commit(Sequence& seq, int64_t from) override { pool_.Commit(seq, from); }
  void Release(Sequence& seq) override { pool_.Release(seq); }
  bool MayMakeRoomLater() const override { return true; }

 private:
  BlockManager pool_;
  int32_t withheld_;
  uint64_t loading_id_ = 0;
  int loading_ = 0;
  int64_t loading_answer_ = kPrefixLoading;
  uint64_t leasing_id_ = 0;
  int32_t lease_slots_ = 0, leased_ = 0;
};

// A request of `prompt` tokens, all `id`, for up to `max_tokens` new ones.
void AddRequest(Scheduler& scheduler, uint64_t id, int64_t prompt, int32_t max_tokens) {
  std::vector<int32_t> t(static_cast<size_t>(prompt), static_cast<int32_t>(id));
  ASSERT_TRUE(
      scheduler.Add(std::make_unique<Sequence>(id, std::move(t), MaxTokens(max_tokens))).ok());
}

class RoomLaterSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    blocks_ = std::make_unique<RoomLaterBlocks>(6, 2);  // 4 slots now, 2 more once given
    scheduler_ = std::make_unique<Scheduler>(Opts(64), *blocks_);
    for (uint64_t id = 1; id <= 2; ++id) {
      std::vector<int32_t> t(6, static_cast<int32_t>(id));
      ASSERT_TRUE(scheduler_->Add(std::make_unique<Sequence>(id, std::move(t), MaxTokens(6))).ok());
    }
  }
  int Step() {  // chunks run
    const StepPlan plan = scheduler_->Schedule();
    std::vector<int32_t> sampled(plan.chunks.size(), 7);
    scheduler_->Update(plan, sampled);
    (void)scheduler_->TakeFinished();
    return static_cast<int>(plan.chunks.size());
  }
  std::unique_ptr<RoomLaterBlocks> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
};

// Both sequences need a third slot at once (9 tokens each): on a private pool the latest admission
// is preempted; here both wait, a waiting request is not admitted meanwhile (its prefix would take
// the room), and when the daemon frees room they go on with no preemption.
TEST_F(RoomLaterSchedulerTest, ARunningSequenceWaitsForRoomBeforeItPreempts) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Step(), 2);
  ASSERT_TRUE(
      scheduler_->Add(std::make_unique<Sequence>(3, std::vector<int32_t>(2, 3), MaxTokens(1)))
          .ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Step(), 0) << "step " << i;
  EXPECT_EQ(scheduler_->num_waiting(), 1u);
  EXPECT_EQ(scheduler_->stats().preemptions, 0);
  EXPECT_EQ(scheduler_->stats().held[static_cast<size_t>(AdmissionHeld::kRunningWait)], 5);
  blocks_->Give();
  EXPECT_EQ(Step(), 2);
  while (!scheduler_->idle()) Step();
  EXPECT_EQ(scheduler_->stats().preemptions, 0);
}

// A running sequence whose last block is full needs a slot for its next token: an admission
// leaves it (a promoted prefix would otherwise take it and stall the decode at its next block).
TEST(RoomLaterAdmissionTest, AnAdmissionLeavesTheSlotARunningDecodeNeedsNext) {
  RoomLaterBlocks blocks(3, 0);
  Scheduler scheduler(Opts(64), blocks);
  auto add = [&](uint64_t id, int64_t prompt, int32_t max_tokens) {
    AddRequest(scheduler, id, prompt, max_tokens);
  };
  add(1, 2 * kBt, 2);  // two full blocks: its first decode needs a third slot
  add(2, 2, 3);        // would fit the third slot
  StepPlan plan = scheduler.Schedule();
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq->id(), 1u);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  EXPECT_EQ(plan.held, AdmissionHeld::kNone) << "the first waiting one (1) was admitted";
  scheduler.Update(plan, std::vector<int32_t>{7});
  plan = scheduler.Schedule();  // sequence 1's decode takes the slot it was left
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq->id(), 1u);
  EXPECT_EQ(plan.held, AdmissionHeld::kRoom) << "2, first now, does not fit";
  EXPECT_EQ(plan.stalled, 0);
  scheduler.Update(plan, std::vector<int32_t>{7});  // its second token: done, slots freed
  int steps = 0;
  while (!scheduler.idle() && steps++ < 10) {
    plan = scheduler.Schedule();
    scheduler.Update(plan, std::vector<int32_t>(plan.chunks.size(), 7));
  }
  EXPECT_TRUE(scheduler.idle());
  EXPECT_EQ(scheduler.stats().preemptions, 0);
}

// Sequence 1 (3 tokens, up to 8 new) running after its prefill, and 2 and 3 (3 tokens, up to
// `max_tokens` new each) waiting behind it.
void OneRunsTwoWait(Scheduler& scheduler, int32_t max_tokens) {
  AddRequest(scheduler, 1, 3, 8);
  const StepPlan plan = scheduler.Schedule();
  ASSERT_EQ(plan.chunks.size(), 1u);
  scheduler.Update(plan, std::vector<int32_t>{7});
  AddRequest(scheduler, 2, 3, max_tokens);
  AddRequest(scheduler, 3, 3, max_tokens);
}

// A waiting sequence whose prefix is still loading is not admitted, and keeps its place: the
// running ones go on meanwhile, and the one behind it is admitted; once loaded it is admitted.
TEST(RoomLaterAdmissionTest, ASequenceBehindALoadingPrefixIsAdmittedMeanwhile) {
  RoomLaterBlocks blocks(8, 0);
  Scheduler scheduler(Opts(64), blocks);
  ASSERT_NO_FATAL_FAILURE(OneRunsTwoWait(scheduler, 4));
  blocks.LoadFor(2, 2);
  StepPlan plan = scheduler.Schedule();
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].seq->id(), 1u);
  EXPECT_EQ(plan.chunks[1].seq->id(), 3u) << "admitted past the loading one";
  EXPECT_EQ(plan.held, AdmissionHeld::kPrefixLoading);
  scheduler.Update(plan, std::vector<int32_t>{7, 7});
  EXPECT_EQ(scheduler.stats().admitted_past_loading, 1);
  plan = scheduler.Schedule();  // 2 still loading: the two running go on
  ASSERT_EQ(plan.chunks.size(), 2u);
  scheduler.Update(plan, std::vector<int32_t>{7, 7});
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  plan = scheduler.Schedule();  // loaded
  ASSERT_EQ(plan.chunks.size(), 3u);
  EXPECT_EQ(plan.chunks[2].seq->id(), 2u);
}

// A waiting sequence whose prefix waits for room to load stops admission: nothing behind it is
// admitted (the room comes to it first).
TEST(RoomLaterAdmissionTest, APrefixWaitingForRoomStopsAdmission) {
  RoomLaterBlocks blocks(8, 0);
  Scheduler scheduler(Opts(64), blocks);
  ASSERT_NO_FATAL_FAILURE(OneRunsTwoWait(scheduler, 2));
  blocks.LoadFor(2, 2, KvBlocks::kPrefixWaitsForRoom);
  StepPlan plan;
  for (int i = 0; i < 2; ++i) {
    plan = scheduler.Schedule();
    ASSERT_EQ(plan.chunks.size(), 1u) << "step " << i;
    EXPECT_EQ(plan.chunks[0].seq->id(), 1u);
    EXPECT_EQ(plan.held, AdmissionHeld::kPrefixRoom);
    scheduler.Update(plan, std::vector<int32_t>{7});
  }
  EXPECT_EQ(scheduler.num_waiting(), 2u);
  plan = scheduler.Schedule();
  EXPECT_EQ(plan.chunks.size(), 3u);  // 2 is admitted, and 3 behind it
  EXPECT_EQ(plan.held, AdmissionHeld::kNone);
  EXPECT_EQ(scheduler.stats().admitted_past_loading, 0);
  EXPECT_EQ(scheduler.stats().held[static_cast<size_t>(AdmissionHeld::kPrefixRoom)], 2);
}

// A waiting sequence's prefix leased into the tier but not admitted (no room for the rest of it)
// gives way to a running sequence that needs a slot: the running one neither waits nor is
// preempted, and the waiting one runs once there is room.
TEST(RoomLaterAdmissionTest, ALeasedPrefixNotAdmittedGivesWayToARunningSequence) {
  RoomLaterBlocks blocks(4, 0);
  Scheduler scheduler(Opts(64), blocks);
  auto add = [&](uint64_t id, int64_t prompt, int32_t max_tokens) {
    AddRequest(scheduler, id, prompt, max_tokens);
  };
  add(1, kBt, 10);  // one block; its decodes need a second and a third
  StepPlan plan = scheduler.Schedule();
  scheduler.Update(plan, std::vector<int32_t>{7});
  add(2, 3 * kBt, 2);  // three blocks: its leased prefix takes the 2 slots left, then fits no more
  blocks.LeasePrefixOf(2, 2);
  int steps = 0;
  while (scheduler.num_running() + scheduler.num_waiting() > 1 && steps++ < 40) {
    plan = scheduler.Schedule();
    ASSERT_GE(plan.chunks.size(), 1u) << "step " << steps;
    EXPECT_EQ(plan.chunks[0].seq->id(), 1u) << "step " << steps;
    EXPECT_EQ(plan.stalled, 0) << "step " << steps;
    scheduler.Update(plan, std::vector<int32_t>(plan.chunks.size(), 7));
    (void)scheduler.TakeFinished();
  }
  EXPECT_EQ(scheduler.stats().preemptions, 0);
  EXPECT_GT(scheduler.stats().prefixes_given_back, 0);
  while (!scheduler.idle() && steps++ < 80) {
    plan = scheduler.Schedule();
    scheduler.Update(plan, std::vector<int32_t>(plan.chunks.size(), 7));
  }
  EXPECT_TRUE(scheduler.idle());
}

// Beside a running sequence, a waiting one whose first chunk does not fit whole waits (a sliver
// admitted into a full tier grows into the running one's room); once nothing runs it is admitted.
TEST(RoomLaterAdmissionTest, AFirstChunkThatDoesNotFitWaitsWhileOthersRun) {
  RoomLaterBlocks blocks(4, 0);
  Scheduler scheduler(Opts(64), blocks);
  auto add = [&](uint64_t id, int64_t prompt, int32_t max_tokens) {
    AddRequest(scheduler, id, prompt, max_tokens);
  };
  add(1, kBt - 1, 2);  // one block for its prompt and first token
  add(2, 4 * kBt, 1);  // four blocks: three are free
  StepPlan plan = scheduler.Schedule();
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  scheduler.Update(plan, std::vector<int32_t>{7});
  plan = scheduler.Schedule();  // 1's last token; 2 still waits
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq->id(), 1u);
  scheduler.Update(plan, std::vector<int32_t>{7});
  plan = scheduler.Schedule();  // nothing runs: 2 is admitted, whole
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq->id(), 2u);
  EXPECT_EQ(plan.chunks[0].n, 4 * kBt);
}

// Room that never comes: after kDefaultRoomPatienceSteps steps the latest admission gives way.
TEST_F(RoomLaterSchedulerTest, RoomThatNeverComesPreemptsAfterThePatience) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Step(), 2);
  for (int i = 0; i < kDefaultRoomPatienceSteps; ++i) EXPECT_EQ(Step(), 0) << "step " << i;
  EXPECT_EQ(scheduler_->stats().preemptions, 0);
  EXPECT_EQ(Step(), 1);  // sequence 1 goes on; 2 gave way
  EXPECT_EQ(scheduler_->stats().preemptions, 1);
  while (!scheduler_->idle()) Step();
}

// With no patience (SchedulerOptions::room_patience_steps 0) the latest admission gives way at
// the first shortage, as on a private pool.
TEST(RoomLaterAdmissionTest, NoPatiencePreemptsAtTheFirstShortage) {
  RoomLaterBlocks blocks(6, 2);
  SchedulerOptions o = Opts(64);
  o.room_patience_steps = 0;
  Scheduler scheduler(o, blocks);
  for (uint64_t id = 1; id <= 2; ++id) AddRequest(scheduler, id, 6, 6);
  auto step = [&] {
    const StepPlan plan = scheduler.Schedule();
    scheduler.Update(plan, std::vector<int32_t>(plan.chunks.size(), 7));
    (void)scheduler.TakeFinished();
    return plan.chunks.size();
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(), 2u);
  EXPECT_EQ(step(), 1u);  // both need a third slot: 2 gives way at once
  EXPECT_EQ(scheduler.stats().preemptions, 1);
  o.room_patience_steps = -1;
  EXPECT_FALSE(o.Validate().ok());
}

}  // namespace
}  // namespace kvtier::engine
