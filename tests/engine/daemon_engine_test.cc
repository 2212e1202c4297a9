// CreateDaemonEngine (engine/daemon_engine.h) against a real kvtierd: the CPU backend attends in
// T1, the GPU backend in T0 (GPU tests skip, saying why, without one). Each gives the tokens the
// same backend gives on a private pool; a second engine (another connection) finds the first one's
// blocks in the tier they are in and says so per request (RequestOutput::prompt_cached_from); and
// blocks the GPU hashed at publish reach T2 and come back after a restart with the same tokens
// (T2 verifies each block's XXH3-64 as it writes it).
#include "engine/daemon_engine.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu_backend.h"
#include "engine/gpu_backend.h"
#include "engine/prefix_loader.h"
#include "kernels/gpu_runtime.h"
#include "tests/daemon/kvtierd_process.h"
#include "tests/daemon/kvtierd_test_util.h"

namespace kvtier::engine {
namespace {

using kvtier::testing::KvtierdProcess;

constexpr int64_t kBlockTokens = 16;  // llama3 test model: 16 tokens = 8 KiB fp32, 4 KiB bf16
constexpr const char* kModel = KVTIER_SOURCE_DIR "/tests/engine/data/models/llama3";

std::vector<int32_t> Prompt(int64_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((seed * 131 + 17 * i * i + i) % 509);
  return t;
}

std::vector<RequestOutput> RunAll(LlmEngine& engine, const std::vector<std::vector<int32_t>>& ps,
                                  int32_t max_tokens) {
  RequestOptions o;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  std::vector<uint64_t> ids;
  for (const auto& p : ps) ids.push_back(engine.Add(p, o).value_or(0));
  auto done = engine.RunUntilIdle();
  EXPECT_TRUE(done.ok()) << done.status().ToString();
  std::vector<RequestOutput> out(ps.size());
  for (RequestOutput& r : done.value_or(std::vector<RequestOutput>{})) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == r.id) out[i] = std::move(r);
    }
  }
  return out;
}

const std::vector<std::vector<int32_t>>& Prompts() {
  static const auto* p =
      new std::vector<std::vector<int32_t>>{Prompt(40, 1), Prompt(70, 2), Prompt(23, 3)};
  return *p;
}

class DaemonEngineTest : public ::testing::Test {
 protected:
  void Start(const std::string& slot_bytes, bool t0, const std::string& t1 = "4MiB",
             const std::string& t0_capacity = "4MiB") {
    std::vector<std::string> flags = {
        "--t1.capacity_bytes",    t1,     "--t1.slot_bytes",     slot_bytes,
        "--t1.huge_pages",        "off",  "--t1.touch_threads",  "1",
        "--t2.enabled",           "true", "--t2.capacity_bytes", "8MiB",
        "--daemon.flush_on_stop", "true"};
    if (t0) {
      for (const std::string& f : {std::string("--t0.enabled"), std::string("true"),
                                   std::string("--t0.capacity_bytes"), t0_capacity})
        flags.push_back(f);
    }
    auto d = KvtierdProcess::Start(dir_.path(), flags);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // `spilled` and then 17 other prompts of 200 tokens (12 blocks each) through `engine`, one at a
  // time, on a daemon of 64 slots: `spilled`'s blocks leave T1 for T2. Its output.
  static RequestOutput SpillPastT1(LlmEngine& engine, const std::vector<int32_t>& spilled) {
    const std::vector<RequestOutput> first = RunAll(engine, {spilled}, 4);
    for (int32_t s = 1; s < 18; ++s) RunAll(engine, {Prompt(200, 100 + s)}, 4);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the evictor's last moves
    return first.empty() ? RequestOutput{} : first[0];
  }

  // Request `again` (the spilled prompt once more) is among `done` with `first`'s tokens and its
  // prefix from T2; or from T1 when its load was given back for a running request's room
  // (Scheduler: GiveBackUnadmitted) after it had promoted the blocks into T1.
  static void ExpectServedFromBelow(const std::vector<RequestOutput>& done, uint64_t again,
                                    const RequestOutput& first) {
    bool seen = false;
    for (const RequestOutput& r : done) {
      if (r.id != again) continue;
      seen = true;
      EXPECT_EQ(r.tokens, first.tokens);
      EXPECT_GT(r.prompt_cached_from[2] + r.prompt_cached_from[3], 0) << "its prefix was cached";
    }
    EXPECT_TRUE(seen);
  }

  DaemonEngineOptions Options(const std::string& name) const {
    DaemonEngineOptions o;
    o.socket_path = daemon_->socket_path();
    o.client_name = name;
    o.block_tokens = kBlockTokens;
    return o;
  }

  // 18 prompts of 200 tokens (12 blocks each, published by one commit) through `d`, more than
  // the daemon's upper tiers hold: the evictor moves the first ones down to T2 meanwhile, with no
  // block refused as changed after commit, and the first prompt comes back with blocks from T2.
  void ExpectEvictedBlocksReachT2(DaemonEngine& d) {
    std::vector<std::vector<int32_t>> many;
    for (int32_t s = 0; s < 18; ++s) many.push_back(Prompt(200, 100 + s));
    for (const auto& p : many) RunAll(*d.engine, {p}, 4);
    EXPECT_TRUE(d.blocks->status().ok()) << d.blocks->status();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the evictor's last moves
    EXPECT_EQ(daemon_->Log().find("no longer matches"), std::string::npos) << daemon_->Log();
    const std::vector<RequestOutput> first = RunAll(*d.engine, {many[0]}, 4);
    EXPECT_GT(first[0].prompt_cached_from[3], 0) << "the first prompt's blocks reached T2";
  }

  // A CPU engine on a daemon of 64 T1 slots (spilled_engine_), whose prompt spilled_ ran once
  // (first_) and was then pushed down to T2 by 17 others (SpillPastT1); it takes prefixes from
  // tiers down to lowest_prefix_tier.
  void StartSpilled(Tier lowest_prefix_tier = Tier::kT3) {
    auto model = CpuModel::Load(kModel);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    ASSERT_NO_FATAL_FAILURE(Start("8KiB", false, "512KiB"));  // 64 slots: 18 x 12 blocks spill
    DaemonEngineOptions o = Options("a");
    o.lowest_prefix_tier = lowest_prefix_tier;
    auto d = CreateDaemonEngine(model_.get(), nullptr, o);
    ASSERT_TRUE(d.ok()) << d.status() << "\n" << daemon_->Log();
    spilled_engine_ = std::move(*d);
    first_ = SpillPastT1(*spilled_engine_.engine, spilled_);
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
  // StartSpilled's (declared after the daemon: the engine goes first).
  std::unique_ptr<CpuModel> model_;
  DaemonEngine spilled_engine_;
  const std::vector<int32_t> spilled_ = Prompt(200, 100);
  RequestOutput first_;
};

TEST_F(DaemonEngineTest, CpuEngineAttendsInT1AndASecondEngineHitsIt) {
  auto model = CpuModel::Load(kModel);
  ASSERT_TRUE(model.ok()) << model.status();
  auto local = LlmEngine::Create(std::make_unique<CpuBackend>(**model, kBlockTokens, 64), {});
  ASSERT_TRUE(local.ok()) << local.status();
  const std::vector<RequestOutput> want = RunAll(**local, Prompts(), 10);
  ASSERT_NO_FATAL_FAILURE(Start("8KiB", false));
  {
    auto a = CreateDaemonEngine(model->get(), nullptr, Options("a"));
    ASSERT_TRUE(a.ok()) << a.status() << "\n" << daemon_->Log();
    EXPECT_EQ(a->kv->tier(), Tier::kT1);
    const std::vector<RequestOutput> got = RunAll(*a->engine, Prompts(), 10);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
    EXPECT_GT(a->blocks->stats().published, 0);
  }
  auto b = CreateDaemonEngine(model->get(), nullptr, Options("b"));
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<RequestOutput> again = RunAll(*b->engine, {Prompts()[1]}, 10);
  EXPECT_EQ(again[0].tokens, want[1].tokens);
  EXPECT_EQ(again[0].prompt_cached_from, (CachedBySource{0, 0, 64, 0}));  // (70 - 1) / 16 blocks
}

// Blocks the engine published into T1 that the evictor moves to T2 while the engine goes on
// writing other T1 slots keep the checksum they were published with.
TEST_F(DaemonEngineTest, CpuBlocksEvictedToT2KeepTheirChecksums) {
  auto model = CpuModel::Load(kModel);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NO_FATAL_FAILURE(Start("8KiB", false, "512KiB"));  // 64 slots: 18 x 12 blocks spill
  auto a = CreateDaemonEngine(model->get(), nullptr, Options("a"));
  ASSERT_TRUE(a.ok()) << a.status() << "\n" << daemon_->Log();
  ExpectEvictedBlocksReachT2(*a);
}

// A prefix found in T2 is promoted on the engine's loader connection while the running request
// decodes: the step that finds it gives the running request its token and admits nothing (inline,
// the step would have waited for the disk and prefilled the new request); a later step admits it
// with its prefix from T2, and its tokens are those of its first run.
TEST_F(DaemonEngineTest, APrefixFromT2LoadsWhileTheRunningRequestDecodes) {
  ASSERT_NO_FATAL_FAILURE(StartSpilled());
  DaemonEngine* d = &spilled_engine_;
  RequestOptions o;
  o.max_tokens = 30;
  o.ignore_eos = true;
  const uint64_t running = d->engine->Add(Prompt(20, 7), o).value_or(0);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(d->engine->Step().ok());  // its prefill, a decode
  o.max_tokens = 4;
  const uint64_t again = d->engine->Add(spilled_, o).value_or(0);
  auto step = d->engine->Step();
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_EQ(step->tokens.size(), 1u);
  EXPECT_EQ(step->tokens[0].id, running);
  EXPECT_EQ(d->blocks->stats().loads, 1);
  auto done = d->engine->RunUntilIdle();
  ASSERT_TRUE(done.ok()) << done.status();
  ExpectServedFromBelow(*done, again, first_);
  EXPECT_TRUE(d->blocks->status().ok()) << d->blocks->status();
}

// With lowest_prefix_tier T1 a prefix the daemon has only in T2 is computed, not loaded (the
// knob for a disk that reads slower than the model computes): the same tokens, no load. The
// blocks computed again are published into T1 beside their T2 copies, so the next request that
// shares the prefix finds it in T1.
TEST_F(DaemonEngineTest, APrefixBelowTheLowestPrefixTierIsComputedThenFoundInT1) {
  ASSERT_NO_FATAL_FAILURE(StartSpilled(Tier::kT1));
  const int64_t published = spilled_engine_.blocks->stats().published;
  const std::vector<RequestOutput> again = RunAll(*spilled_engine_.engine, {spilled_}, 4);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].tokens, first_.tokens);
  EXPECT_EQ(again[0].prompt_cached_from[3], 0) << "nothing taken from T2";
  EXPECT_EQ(spilled_engine_.blocks->stats().loads, 0);
  EXPECT_GE(spilled_engine_.blocks->stats().published - published,
            (again[0].prompt_tokens - 1) / kBlockTokens)
      << "published beside T2's copies";
  const std::vector<RequestOutput> third = RunAll(*spilled_engine_.engine, {spilled_}, 4);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].tokens, first_.tokens);
  EXPECT_EQ(third[0].prompt_cached_from[3], 0);
  EXPECT_GE(third[0].prompt_cached_from[2],
            (third[0].prompt_tokens - 1) / kBlockTokens * kBlockTokens)
      << "the whole prefix from T1";
  EXPECT_TRUE(spilled_engine_.blocks->status().ok()) << spilled_engine_.blocks->status();
}

// With the loader, a lookup from an earlier step that found a prefix all in the engine's tier is
// asked again before the lease that would take it: here another engine pushed the prefix down to
// T2 in between, and it is loaded on the loader's thread, not promoted by a lease on the engine's
// (a disk read in the engine loop).
TEST_F(DaemonEngineTest, AnOlderLookupIsAskedAgainBeforeALeaseThatWouldReadTheDisk) {
  auto model = CpuModel::Load(kModel);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NO_FATAL_FAILURE(Start("8KiB", false, "512KiB"));  // 64 slots: 17 x 12 blocks spill
  auto a = CreateDaemonEngine(model->get(), nullptr, Options("a"));
  ASSERT_TRUE(a.ok()) << a.status() << "\n" << daemon_->Log();
  const std::vector<int32_t> prompt = Prompt(200, 100);
  RunAll(*a->engine, {prompt}, 4);  // its 12 full blocks in T1, unleased
  RequestOptions o;
  o.max_tokens = 4;
  Sequence seq(uint64_t{1} << 40, prompt, o);  // an id the engine never gives
  Sequence* const waiting[] = {&seq};
  a->blocks->LookAhead(waiting);  // all 12 in T1
  a->blocks->EndStep();           // a step later
  auto b = CreateDaemonEngine(model->get(), nullptr, Options("b"));
  ASSERT_TRUE(b.ok()) << b.status();
  for (int32_t s = 1; s < 18; ++s) RunAll(*b->engine, {Prompt(200, 100 + s)}, 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the evictor's last moves
  EXPECT_EQ(a->blocks->CachedPrefixBlocks(seq), KvBlocks::kPrefixLoading)
      << "loaded on the loader, not leased on the engine's thread";
  EXPECT_EQ(a->blocks->stats().loads, 1);
  a->blocks->Release(seq);
  EXPECT_TRUE(a->blocks->status().ok()) << a->blocks->status();
}

// A load given up while it is queued behind another (PrefixLoader::Finish: its request ended) is
// never sent: it reads nothing and delays no later load. The daemon is paused (SIGSTOP) so the
// first load is certainly in flight while the second waits.
TEST_F(DaemonEngineTest, ALoadGivenUpBeforeItsTurnIsNeverSent) {
  ASSERT_NO_FATAL_FAILURE(Start("8KiB", false));
  client::ClientOptions co;
  co.socket_path = daemon_->socket_path();
  co.client_name = "loader";
  co.ns.model_id = "prefix-loader-test";
  auto c = client::Client::Connect(co);
  ASSERT_TRUE(c.ok()) << c.status();
  PrefixLoader loader(std::move(*c), Tier::kT1);
  auto done = [&loader](uint64_t t) {
    for (int i = 0; i < 1000 && !loader.Poll(t).done; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return loader.Poll(t).done;
  };
  ASSERT_EQ(::kill(daemon_->pid(), SIGSTOP), 0);
  const uint64_t first = loader.Start({BlockKey{1, 1}});
  for (int i = 0; i < 1000 && loader.jobs_sent() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(loader.jobs_sent(), 1) << "the first load is in flight";
  const uint64_t given_up = loader.Start({BlockKey{2, 2}});
  loader.Finish(given_up);
  ASSERT_EQ(::kill(daemon_->pid(), SIGCONT), 0);
  EXPECT_TRUE(done(first));
  const uint64_t last = loader.Start({BlockKey{3, 3}});  // behind where the given-up one was
  EXPECT_TRUE(done(last));
  EXPECT_EQ(loader.Poll(last).run, 0u) << "no such block";
  EXPECT_EQ(loader.jobs_started(), 3);
  EXPECT_EQ(loader.jobs_sent(), 2) << "the given-up load was sent";
  loader.Finish(first);
  loader.Finish(last);
}

// While a prefix found in T2 is promoted on the loader, a short request that came after it is
// admitted and runs (Scheduler: a loading prefix keeps its place, those behind it go on); the
// first then runs with its prefix from below and its first run's tokens.
TEST_F(DaemonEngineTest, AShortRequestBehindALoadingPrefixRunsMeanwhile) {
  ASSERT_NO_FATAL_FAILURE(StartSpilled());
  DaemonEngine* d = &spilled_engine_;
  RequestOptions o;
  o.max_tokens = 4;
  o.ignore_eos = true;
  const uint64_t again = d->engine->Add(spilled_, o).value_or(0);
  const uint64_t behind = d->engine->Add(Prompt(20, 9), o).value_or(0);
  ASSERT_NE(again, 0u);
  ASSERT_NE(behind, 0u);
  auto step = d->engine->Step();
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_EQ(step->tokens.size(), 1u);
  EXPECT_EQ(step->tokens[0].id, behind) << "admitted while the first one's prefix loads";
  EXPECT_EQ(d->blocks->stats().loads, 1);
  EXPECT_EQ(d->engine->scheduler().stats().admitted_past_loading, 1);
  auto done = d->engine->RunUntilIdle();
  ASSERT_TRUE(done.ok()) << done.status();
  ExpectServedFromBelow(*done, again, first_);
  EXPECT_TRUE(d->blocks->status().ok()) << d->blocks->status();
}

// A load starts only when the pool holds it beside the running sequences (DaemonKvBlocks::
// RoomToLoad): beside two that hold half of T1 it waits, and they never preempt; when they are
// done it loads, and gives the same tokens.
TEST_F(DaemonEngineTest, APrefixLoadWaitsForRoomBesideRunningSequences) {
  ASSERT_NO_FATAL_FAILURE(StartSpilled());
  DaemonEngine* d = &spilled_engine_;
  RequestOptions o;
  o.max_tokens = 20;
  o.ignore_eos = true;
  // 15 blocks each after their prefill (the model's context is 256 tokens): with the 12 to load,
  // their growth and the headroom, past 64 slots.
  std::vector<uint64_t> running;
  for (int32_t seed : {7, 8}) running.push_back(d->engine->Add(Prompt(230, seed), o).value_or(0));
  ASSERT_NE(running[0], 0u);
  ASSERT_NE(running[1], 0u);
  // Their prefills (the second may wait for kvtierd to make room in T1 first).
  for (int i = 0; i < 2000 && d->engine->scheduler().num_running() < 2; ++i) {
    ASSERT_TRUE(d->engine->Step().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(d->engine->scheduler().num_running(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the evictor makes room again
  o.max_tokens = 4;
  const uint64_t again = d->engine->Add(spilled_, o).value_or(0);
  ASSERT_NE(again, 0u);
  int tokens = 0;  // the running ones'; a step may also wait for kvtierd to make room
  for (int i = 0; i < 2000 && tokens < 10; ++i) {
    auto step = d->engine->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    for (const auto& t : step->tokens) EXPECT_NE(t.id, again);
    tokens += static_cast<int>(step->tokens.size());
    if (step->waiting_for_room) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(tokens, 10);
  EXPECT_EQ(d->blocks->stats().loads, 0);
  EXPECT_GE(d->blocks->stats().loads_deferred, 1) << FormatStats(d->blocks->stats());
  auto done = d->engine->RunUntilIdle();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(d->blocks->stats().loads, 1);
  for (const RequestOutput& r : *done) EXPECT_EQ(r.preemptions, 0) << "request " << r.id;
  ExpectServedFromBelow(*done, again, first_);
  EXPECT_TRUE(d->blocks->status().ok()) << d->blocks->status();
}

TEST_F(DaemonEngineTest, WrongSlotSizeNamesTheFlagToUse) {
  auto model = CpuModel::Load(kModel);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NO_FATAL_FAILURE(Start("4KiB", false));
  auto a = CreateDaemonEngine(model->get(), nullptr, Options("a"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("--t1.slot_bytes 8192"), std::string::npos) << a.status();
}

class DaemonEngineGpuTest : public DaemonEngineTest {
 protected:
  void SetUp() override {
    if (const std::string why = gpu::UnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    auto model = GpuModel::Load(kModel);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto local = GpuBackend::Create(*model_, kBlockTokens, 64);
    ASSERT_TRUE(local.ok()) << local.status();
    auto engine = LlmEngine::Create(std::move(*local), {});
    ASSERT_TRUE(engine.ok()) << engine.status();
    want_ = RunAll(**engine, Prompts(), 10);
  }

  std::unique_ptr<GpuModel> model_;
  std::vector<RequestOutput> want_;  // on a private pool
};

TEST_F(DaemonEngineGpuTest, EngineInT0GivesThePrivatePoolsTokensAndAnotherEngineHitsT0) {
  ASSERT_NO_FATAL_FAILURE(Start("4KiB", true));
  auto a = CreateDaemonEngine(nullptr, model_.get(), Options("a"));
  ASSERT_TRUE(a.ok()) << a.status() << "\n" << daemon_->Log();
  EXPECT_EQ(a->kv->tier(), Tier::kT0);
  const std::vector<RequestOutput> got = RunAll(*a->engine, Prompts(), 10);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].tokens, want_[i].tokens) << i;
  EXPECT_GT(a->blocks->stats().published, 0);
  EXPECT_TRUE(a->blocks->status().ok()) << a->blocks->status();
  auto b = CreateDaemonEngine(nullptr, model_.get(), Options("b"));
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<RequestOutput> again = RunAll(*b->engine, {Prompts()[1]}, 10);
  EXPECT_EQ(again[0].tokens, want_[1].tokens);
  EXPECT_EQ(again[0].prompt_cached_from, (CachedBySource{0, 64, 0, 0}));
}

TEST_F(DaemonEngineGpuTest, BlocksHashedOnTheGpuComeBackFromT2AfterARestart) {
  ASSERT_NO_FATAL_FAILURE(Start("4KiB", true));
  {
    auto a = CreateDaemonEngine(nullptr, model_.get(), Options("a"));
    ASSERT_TRUE(a.ok()) << a.status() << "\n" << daemon_->Log();
    RunAll(*a->engine, Prompts(), 10);
  }
  ASSERT_EQ(daemon_->Stop(), 0) << daemon_->Log();  // flush_on_stop: every block to T2
  daemon_.reset();
  ASSERT_NO_FATAL_FAILURE(Start("4KiB", true));
  auto c = CreateDaemonEngine(nullptr, model_.get(), Options("c"));
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<RequestOutput> again = RunAll(*c->engine, Prompts(), 10);
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i].tokens, want_[i].tokens) << i;
  EXPECT_EQ(again[1].prompt_cached_from, (CachedBySource{0, 0, 0, 64}));
  EXPECT_EQ(daemon_->Log().find("checksum mismatch"), std::string::npos) << daemon_->Log();
}

// Blocks born in T0 that the evictor moves T0 -> T1 -> T2 while the engine goes on writing other
// T0 slots keep the checksum the GPU gave them at publish. (The 8B benchmark with 2 MiB slots saw
// T1 -> T2 demotions refused as "no longer matches the checksum given at commit".)
TEST_F(DaemonEngineGpuTest, BlocksEvictedThroughT1ToT2KeepTheirChecksums) {
  // T0 of 32 slots and T1 of 64: 18 prompts of 12 blocks (each published by one commit, as an
  // 8K prompt's 512 are) push the first ones down to T2.
  ASSERT_NO_FATAL_FAILURE(Start("4KiB", true, "256KiB", "128KiB"));
  auto a = CreateDaemonEngine(nullptr, model_.get(), Options("a"));
  ASSERT_TRUE(a.ok()) << a.status() << "\n" << daemon_->Log();
  ExpectEvictedBlocksReachT2(*a);
}

// The same with prompts prefilled 48 tokens a step: chunks that sample nothing publish their
// blocks too, and the GPU hashes them only once their KV writes are done (GpuBackend::Step waits
// for them; it used to return at once when no row sampled, and the 8B benchmark's 8K prompts, 16
// chunks of 512, had every block refused at T2).
TEST_F(DaemonEngineGpuTest, BlocksOfPrefillChunksThatSampleNothingKeepTheirChecksums) {
  ASSERT_NO_FATAL_FAILURE(Start("4KiB", true, "256KiB", "128KiB"));
  DaemonEngineOptions o = Options("a");
  o.engine.max_step_tokens = 48;
  auto a = CreateDaemonEngine(nullptr, model_.get(), o);
  ASSERT_TRUE(a.ok()) << a.status() << "\n" << daemon_->Log();
  ExpectEvictedBlocksReachT2(*a);
}

TEST_F(DaemonEngineGpuTest, ADaemonWithoutT0IsRefusedAndSaysSo) {
  ASSERT_NO_FATAL_FAILURE(Start("4KiB", false));
  auto a = CreateDaemonEngine(nullptr, model_.get(), Options("a"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition) << a.status();
  EXPECT_NE(a.status().message().find("--t0.capacity_bytes"), std::string::npos) << a.status();
}

}  // namespace
}  // namespace kvtier::engine
