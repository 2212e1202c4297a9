// The engine on kvtierd's slots (engine/daemon_kv_blocks.h), against a real kvtierd: the CPU
// backend attends in T1 in place, requests give exactly the tokens the engine gives on its own
// private pool, the blocks one engine computes are prefix hits for another engine (another
// connection), and a working-slot quota too small for every request at once only makes them wait
// or be preempted (resumed from their published blocks), never changes a token.
#include "engine/daemon_kv_blocks.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/cpu_backend.h"
#include "engine/llm_engine.h"
#include "tests/daemon/kvtierd_process.h"
#include "tests/daemon/kvtierd_test_util.h"

namespace kvtier::engine {
namespace {

using kvtier::testing::KvtierdProcess;

constexpr int64_t kBlockTokens = 8;  // llama3 test model: 8 tokens * 512 B = 4 KiB per block

std::vector<std::string> DaemonFlags(const std::string& max_working_slots,
                                     const std::string& t1 = "1MiB") {
  return {"--t1.capacity_bytes",
          t1,
          "--t1.slot_bytes",
          "4KiB",
          "--t1.touch_threads",
          "1",
          "--t1.huge_pages",
          "off",
          "--t2.enabled",
          "false",
          "--daemon.max_working_slots",
          max_working_slots};
}

std::vector<int32_t> Prompt(int64_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((seed * 131 + 17 * i * i + i) % 509);
  return t;
}

RequestOptions Greedy(int32_t max_tokens) {
  RequestOptions o;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  return o;
}

class DaemonKvBlocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = CpuModel::Load(KVTIER_SOURCE_DIR "/tests/engine/data/models/llama3");
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }

  void StartDaemon(const std::string& max_working_slots, const std::string& t1 = "1MiB") {
    auto d = KvtierdProcess::Start(dir_.path(), DaemonFlags(max_working_slots, t1));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  std::unique_ptr<client::Client> Connect(const std::string& name) {
    Namespace ns;
    ns.model_id = model_->config().name;
    ns.dtype = "fp32";
    ns.block_tokens = kBlockTokens;
    auto c = client::Client::Connect({daemon_->socket_path(), ns, name});
    EXPECT_TRUE(c.ok()) << c.status() << "\n" << daemon_->Log();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // An engine over `client`'s T1; `blocks` is set to its KV blocks (owned by the engine).
  std::unique_ptr<LlmEngine> DaemonEngine(client::Client& client, DaemonKvBlocks** blocks) {
    const uint64_t slot_bytes = model_->KvGeometry(kBlockTokens).slot_elems() * sizeof(float);
    auto b = DaemonKvBlocks::Create(&client, kBlockTokens, slot_bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    auto pool = DaemonKvBlocks::CpuPool(&client, model_->KvGeometry(kBlockTokens));
    EXPECT_TRUE(pool.ok()) << pool.status();
    if (!b.ok() || !pool.ok()) return nullptr;
    *blocks = b->get();
    auto engine = LlmEngine::Create(std::make_unique<CpuBackend>(*model_, std::move(*pool)),
                                    std::move(*b), EngineOptions{});
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  // Every request through `engine`; outputs in order of the requests.
  static std::vector<RequestOutput> RunAll(LlmEngine& engine,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           int32_t max_tokens) {
    std::vector<uint64_t> ids;
    for (const auto& p : prompts) {
      auto id = engine.Add(p, Greedy(max_tokens));
      EXPECT_TRUE(id.ok()) << id.status();
      ids.push_back(id.value_or(0));
    }
    auto done = engine.RunUntilIdle();
    EXPECT_TRUE(done.ok()) << done.status().ToString();
    std::vector<RequestOutput> out(prompts.size());
    for (RequestOutput& o : done.value_or(std::vector<RequestOutput>{})) {
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] == o.id) out[i] = std::move(o);
      }
    }
    return out;
  }

  // The same requests on a private pool: what the daemon must not change.
  std::vector<RequestOutput> Local(const std::vector<std::vector<int32_t>>& prompts,
                                   int32_t max_tokens) {
    auto engine = LlmEngine::Create(std::make_unique<CpuBackend>(*model_, kBlockTokens, 256),
                                    EngineOptions{});
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? RunAll(**engine, prompts, max_tokens) : std::vector<RequestOutput>{};
  }

  // Five requests of 30 to 42 tokens and 40 new ones on kvtierd's slots (client_, engine_,
  // blocks_), each giving the tokens it gives on a private pool.
  void RunFiveAgainstAPrivatePool(const std::string& client_name, int32_t seed) {
    std::vector<std::vector<int32_t>> prompts;
    for (int32_t s = 0; s < 5; ++s) prompts.push_back(Prompt(30 + 3 * s, seed + s));
    const std::vector<RequestOutput> want = Local(prompts, 40);
    client_ = Connect(client_name);
    ASSERT_NE(client_, nullptr);
    engine_ = DaemonEngine(*client_, &blocks_);
    ASSERT_NE(engine_, nullptr);
    const std::vector<RequestOutput> got = RunAll(*engine_, prompts, 40);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    }
    EXPECT_TRUE(blocks_->status().ok()) << blocks_->status();
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
  std::unique_ptr<CpuModel> model_;
  std::unique_ptr<client::Client> client_;  // declared before engine_: outlives it
  std::unique_ptr<LlmEngine> engine_;
  DaemonKvBlocks* blocks_ = nullptr;  // engine_'s
};

TEST_F(DaemonKvBlocksTest, TokensEqualAPrivatePoolsAndAnotherEngineHitsThePublishedBlocks) {
  StartDaemon("256");
  const std::vector<std::vector<int32_t>> prompts = {Prompt(20, 1), Prompt(37, 2), Prompt(9, 3)};
  const std::vector<RequestOutput> want = Local(prompts, 12);
  auto a = Connect("engine-a");
  ASSERT_NE(a, nullptr);
  DaemonKvBlocks* blocks_a = nullptr;
  auto engine_a = DaemonEngine(*a, &blocks_a);
  ASSERT_NE(engine_a, nullptr);
  const std::vector<RequestOutput> got = RunAll(*engine_a, prompts, 12);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].cached_tokens, 0) << "request " << i;
  }
  // Every full block of prompt and output (but the last token's) was published: 20+12-1 -> 3,
  // 37+12-1 -> 6, 9+12-1 -> 2.
  EXPECT_EQ(blocks_a->stats().published, 11);
  // A step's blocks go in one call: the first step's 7 (2 + 4 + 1, of three sequences), then
  // the 4 that decode steps filled, each in a step of its own (tokens 40, 24, 16 and 48).
  EXPECT_EQ(blocks_a->stats().publish_calls, 5);
  // The three were admitted in the first step, their prefixes looked up in one LookupMany.
  EXPECT_EQ(blocks_a->stats().lookup_batches, 1);
  EXPECT_EQ(blocks_a->stats().lookups, 3);
  EXPECT_TRUE(blocks_a->status().ok()) << blocks_a->status();

  // Another engine, on another connection, finds request 1's blocks in kvtierd.
  auto b = Connect("engine-b");
  ASSERT_NE(b, nullptr);
  DaemonKvBlocks* blocks_b = nullptr;
  auto engine_b = DaemonEngine(*b, &blocks_b);
  ASSERT_NE(engine_b, nullptr);
  const std::vector<RequestOutput> again = RunAll(*engine_b, {prompts[1]}, 12);
  EXPECT_EQ(again[0].tokens, want[1].tokens);
  EXPECT_EQ(again[0].cached_tokens, 32);  // (37 - 1) / 8 full blocks: at least one token to run
  EXPECT_EQ(again[0].model_tokens, 37 - 32 + 11);
  EXPECT_EQ(blocks_b->stats().attached_blocks, 4);
  // Found in T1 (this daemon has no T0), and said so per request.
  EXPECT_EQ(blocks_b->stats().attached_from, (CachedBySource{0, 0, 4, 0}));
  EXPECT_EQ(again[0].prompt_cached_from, (CachedBySource{0, 0, 32, 0}));
  EXPECT_EQ(blocks_b->stats().published, 0);  // its new blocks were engine A's already
  EXPECT_GT(blocks_b->stats().already_present, 0);
}

// A prompt of more blocks than the working-slot quota runs in chunks that fit (its published
// blocks leave the quota) instead of waiting for room it can never get.
TEST_F(DaemonKvBlocksTest, APromptLargerThanTheWorkingSlotQuotaRunsInChunksThatFit) {
  StartDaemon("6");
  const std::vector<std::vector<int32_t>> prompts = {Prompt(100, 7)};  // 13 blocks
  const std::vector<RequestOutput> want = Local(prompts, 10);
  client_ = Connect("engine-big-prompt");
  ASSERT_NE(client_, nullptr);
  engine_ = DaemonEngine(*client_, &blocks_);
  ASSERT_NE(engine_, nullptr);
  const std::vector<RequestOutput> got = RunAll(*engine_, prompts, 10);
  EXPECT_EQ(got[0].tokens, want[0].tokens);
  EXPECT_EQ(got[0].preemptions, 0);
  EXPECT_TRUE(blocks_->status().ok()) << blocks_->status();
}

TEST_F(DaemonKvBlocksTest, AWorkingSlotQuotaTooSmallForAllAtOnceChangesNoToken) {
  StartDaemon("6");  // one request's prompt (4 blocks) and a little more, at a time
  ASSERT_NO_FATAL_FAILURE(RunFiveAgainstAPrivatePool("engine-small-quota", 10));
  EXPECT_LE(blocks_->free_slots(), 6);
  // The quota held them back: on a private pool the five run side by side (41 steps: one prefill
  // and 40 decodes); here prefills shrink to the slots the quota leaves, and requests wait.
  EXPECT_GT(engine_->scheduler().stats().steps, 41);
}

TEST_F(DaemonKvBlocksTest, AT1TooSmallForAllAtOncePreemptsAndChangesNoToken) {
  StartDaemon("256", "96KiB");  // 24 slots; the five requests need about 45 blocks in all
  ASSERT_NO_FATAL_FAILURE(RunFiveAgainstAPrivatePool("engine-small-t1", 20));
  // Running sequences gave way (their published blocks left to the daemon), and came back.
  EXPECT_GT(engine_->scheduler().stats().preemptions, 0);
  EXPECT_GT(blocks_->stats().published, 40);
}

TEST_F(DaemonKvBlocksTest, SlotsOfAnotherSizeAreRefusedNamingTheFlag) {
  StartDaemon("256");
  auto c = Connect("engine-wrong-size");
  ASSERT_NE(c, nullptr);
  auto b = DaemonKvBlocks::Create(c.get(), kBlockTokens, 8192);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("--t1.slot_bytes 8192"), std::string::npos) << b.status();
  // T0 wants the GPU's checksum at publish, and a daemon with a T0 (this one has none).
  DaemonKvBlocksOptions t0_options;
  t0_options.tier = Tier::kT0;
  auto t0 = DaemonKvBlocks::Create(c.get(), kBlockTokens, 4096, t0_options);
  EXPECT_EQ(t0.status().code(), absl::StatusCode::kInvalidArgument) << t0.status();
  t0_options.checksum = [](std::span<const uint32_t>, std::span<uint64_t>) {
    return absl::OkStatus();
  };
  t0 = DaemonKvBlocks::Create(c.get(), kBlockTokens, 4096, t0_options);
  EXPECT_EQ(t0.status().code(), absl::StatusCode::kFailedPrecondition) << t0.status();
  EXPECT_NE(t0.status().message().find("no T0"), std::string::npos) << t0.status();
}

}  // namespace
}  // namespace kvtier::engine
