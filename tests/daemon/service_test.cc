// The daemon's operations over a real tier manager: namespace isolation, store-once, two-phase
// puts, sessions that close with leases and puts open, the key-scope secret, and lookup recording
// that `kvtier replay` reads back.
#include "daemon/service.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <fstream>
#include <future>
#include <numeric>
#include <set>
#include <thread>

#include "daemon/lookup_recorder.h"
#include "tests/tiers/tier_manager_test_util.h"
#include "tools/replay/trace_reader.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using testing::ManagerOptions;
using testing::TempDir;

Namespace Ns(const std::string& model, const std::string& salt = "") {
  Namespace ns;
  ns.model_id = model;
  ns.cache_salt = salt;
  return ns;
}

BlockKey K(uint64_t i) { return testing::KeyOf(i); }

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = TierManager::Create(ManagerOptions(16, "", 0));
    ASSERT_TRUE(m.ok()) << m.status();
    tiers_ = std::move(*m);
    scope_ = std::make_unique<KeyScope>(*KeyScope::Load(""));
    service_ = std::make_unique<Service>(*tiers_, *scope_, nullptr);
  }

  std::shared_ptr<Session> Open(const Namespace& ns) {
    auto s = service_->Open(ns);
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }

  // Puts keys [first, first + n) of `s` as one sequence, payload i = FillPayload(i), with
  // checksums. Returns the per-key commit outcome.
  std::vector<BlockCode> PutN(Session& s, uint64_t first, uint64_t n) {
    std::vector<protocol::PutBeginItem> begin;
    for (uint64_t i = first; i < first + n; ++i) {
      std::optional<BlockKey> parent;
      if (i > first) parent = K(i - 1);
      begin.push_back(protocol::PutBeginItem{K(i), parent, 4096});
    }
    std::vector<SlotResult> begun = service_->PutBegin(s, begin);
    std::vector<protocol::PutCommitItem> items;
    for (size_t i = 0; i < begin.size(); ++i) {
      if (begun[i].code != BlockCode::kOk) continue;
      auto* data = reinterpret_cast<uint8_t*>(tiers_->t1().SlotData(begun[i].slot));
      testing::FillPayload(first + i, data, 4096);
      items.push_back(protocol::PutCommitItem{begin[i].key, XXH3_64bits(data, 4096)});
    }
    return service_->PutCommit(s, items);
  }

  std::vector<SlotResult> Begin(Session& s, std::vector<uint64_t> ids, uint32_t bytes = 100) {
    std::vector<protocol::PutBeginItem> items;
    for (uint64_t i : ids) items.push_back(protocol::PutBeginItem{K(i), std::nullopt, bytes});
    return service_->PutBegin(s, items);
  }

  std::vector<SlotResult> GetSync(const std::shared_ptr<Session>& s, std::vector<BlockKey> keys) {
    std::promise<std::vector<SlotResult>> p;
    service_->Get(s, keys, [&p](std::vector<SlotResult> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

  size_t LookupN(Session& s, uint64_t n) {
    std::vector<BlockKey> keys;
    for (uint64_t i = 0; i < n; ++i) keys.push_back(K(i));
    std::vector<TierMask> tiers(n);
    return service_->Lookup(s, keys, absl::MakeSpan(tiers));
  }

  std::unique_ptr<TierManager> tiers_;
  std::unique_ptr<KeyScope> scope_;
  std::unique_ptr<Service> service_;
};

TEST_F(ServiceTest, NamespacesNeverSeeEachOthersBlocks) {
  auto a = Open(Ns("model-a")), a2 = Open(Ns("model-a")), b = Open(Ns("model-a", "tenant-b"));
  ASSERT_EQ(PutN(*a, 0, 4), std::vector<BlockCode>(4, BlockCode::kOk));
  EXPECT_EQ(LookupN(*a2, 4), 4u);  // same namespace: shared
  EXPECT_EQ(LookupN(*b, 4), 0u);   // same raw keys, other namespace: nothing to see
  EXPECT_EQ(GetSync(b, {K(0)})[0].code, BlockCode::kMissing);
  EXPECT_EQ(service_->Drop(*b, std::vector<BlockKey>{K(0)})[0], BlockCode::kMissing);
  EXPECT_EQ(LookupN(*a, 4), 4u);  // b's drop did not touch a's block
  // b stores the same raw keys: a separate copy, a's data unchanged.
  ASSERT_EQ(PutN(*b, 0, 4), std::vector<BlockCode>(4, BlockCode::kOk));
  EXPECT_EQ(tiers_->t1().Stats().used_slots, 8u);
}

TEST_F(ServiceTest, TwoClientsStoringOnePrefixStoreItOnce) {
  auto a = Open(Ns("m")), a2 = Open(Ns("m"));
  std::vector<SlotResult> first = Begin(*a, {0, 1});
  std::vector<SlotResult> second = Begin(*a2, {0, 1});  // both in flight
  ASSERT_EQ(first[0].code, BlockCode::kOk);
  ASSERT_EQ(second[0].code, BlockCode::kOk);
  const std::vector<protocol::PutCommitItem> items = {{K(0), 0}, {K(1), 0}};
  EXPECT_EQ(service_->PutCommit(*a, items), std::vector<BlockCode>(2, BlockCode::kOk));
  EXPECT_EQ(service_->PutCommit(*a2, items), std::vector<BlockCode>(2, BlockCode::kAlreadyPresent));
  EXPECT_EQ(tiers_->t1().Stats().used_slots, 2u);
  EXPECT_EQ(Begin(*a2, {0, 1})[1].code, BlockCode::kAlreadyPresent);
}

TEST_F(ServiceTest, APayloadThatDoesNotMatchItsChecksumIsNeverPublished) {
  service_ = std::make_unique<Service>(*tiers_, *scope_, nullptr, nullptr,
                                       ServiceOptions{.verify_puts = true});
  auto a = Open(Ns("m"));
  std::vector<SlotResult> begun = Begin(*a, {5}, 4096);
  ASSERT_EQ(begun[0].code, BlockCode::kOk);
  auto* data = reinterpret_cast<uint8_t*>(tiers_->t1().SlotData(begun[0].slot));
  testing::FillPayload(5, data, 4096);
  const uint64_t sum = XXH3_64bits(data, 4096);
  data[100] ^= 1;  // a torn or wrong copy
  EXPECT_EQ(service_->PutCommit(*a, std::vector<protocol::PutCommitItem>{{K(5), sum}})[0],
            BlockCode::kBadChecksum);
  EXPECT_EQ(LookupN(*a, 6), 0u);
  EXPECT_EQ(tiers_->t1().Stats().used_slots, 0u);
}

TEST_F(ServiceTest, ABadChecksumInAnyBlockOfACommitRejectsThatBlockOnly) {
  service_ = std::make_unique<Service>(*tiers_, *scope_, nullptr, nullptr,
                                       ServiceOptions{.verify_puts = true});
  for (size_t bad = 0; bad < 4; ++bad) {
    auto a = Open(Ns("m", std::to_string(bad)));
    std::vector<SlotResult> begun = Begin(*a, {0, 1, 2, 3}, 4096);
    std::vector<protocol::PutCommitItem> items;
    for (size_t i = 0; i < 4; ++i) {
      ASSERT_EQ(begun[i].code, BlockCode::kOk);
      auto* data = reinterpret_cast<uint8_t*>(tiers_->t1().SlotData(begun[i].slot));
      testing::FillPayload(i, data, 4096);
      items.push_back(protocol::PutCommitItem{K(i), XXH3_64bits(data, 4096)});
      if (i == bad) data[4095] ^= 0x80;  // the slot no longer holds what was hashed
    }
    std::vector<BlockCode> want(4, BlockCode::kOk);
    want[bad] = BlockCode::kBadChecksum;
    EXPECT_EQ(service_->PutCommit(*a, items), want) << bad;
    std::vector<TierMask> tiers(4);
    EXPECT_EQ(
        service_->Lookup(*a, std::vector<BlockKey>{K(0), K(1), K(2), K(3)}, absl::MakeSpan(tiers)),
        bad)
        << "the prefix ends at the rejected block";
  }
  EXPECT_EQ(tiers_->t1().Stats().used_slots, 4u * 3);  // rejected slots came back
}

TEST_F(ServiceTest, AClosedSessionLeavesNoLeaseAndNoPartialBlock) {
  auto a = Open(Ns("m")), b = Open(Ns("m"));
  ASSERT_EQ(PutN(*a, 0, 2)[0], BlockCode::kOk);
  ASSERT_EQ(GetSync(b, {K(0), K(1)})[1].code, BlockCode::kOk);
  EXPECT_EQ(b->leases_held(), 2u);
  EXPECT_EQ(service_->leases_held(), 2u);
  ASSERT_EQ(Begin(*b, {7})[0].code, BlockCode::kOk);
  const uint64_t used = tiers_->t1().Stats().used_slots;
  service_->Close(*b);  // as when the client dies mid-get and mid-put
  EXPECT_EQ(tiers_->t1().Stats().used_slots, used - 1);  // the open put's slot came back
  EXPECT_EQ(tiers_->index().Find(scope_->Scope(NamespaceRoot(Ns("m")), K(0)))->leases, 0u);
  EXPECT_EQ(service_->leases_held(), 0u);
  EXPECT_EQ(LookupN(*a, 8), 2u);                               // K(7) never became visible
  EXPECT_EQ(GetSync(b, {K(0)})[0].code, BlockCode::kMissing);  // and b is closed for good
  EXPECT_EQ(service_->sessions(), 1u);
}

TEST_F(ServiceTest, ProtocolMisuseIsRefusedPerBlock) {
  auto a = Open(Ns("m"));
  EXPECT_EQ(service_->Release(*a, std::vector<BlockKey>{K(0)})[0], BlockCode::kMissing);
  EXPECT_EQ(service_->PutCommit(*a, std::vector<protocol::PutCommitItem>{{K(0), 0}})[0],
            BlockCode::kMissing);  // no put_begin
  ASSERT_EQ(Begin(*a, {1})[0].code, BlockCode::kOk);
  EXPECT_EQ(Begin(*a, {1})[0].code, BlockCode::kMissing);    // already open
  EXPECT_EQ(Begin(*a, {3}, 0)[0].code, BlockCode::kFailed);  // sizes the wire refuses
  EXPECT_EQ(Begin(*a, {3}, testing::kTestSlot + 1)[0].code, BlockCode::kFailed);
  EXPECT_EQ(service_->PutAbort(*a, std::vector<BlockKey>{K(1)})[0], BlockCode::kOk);
  EXPECT_EQ(tiers_->t1().Stats().used_slots, 0u);
  EXPECT_EQ(service_->PutAbort(*a, std::vector<BlockKey>{K(1)})[0], BlockCode::kMissing);
  ASSERT_EQ(PutN(*a, 2, 1)[0], BlockCode::kOk);
  ASSERT_EQ(GetSync(a, {K(2)})[0].code, BlockCode::kOk);
  EXPECT_EQ(service_->Drop(*a, std::vector<BlockKey>{K(2)})[0], BlockCode::kLeased);
  EXPECT_EQ(service_->Release(*a, std::vector<BlockKey>{K(2)})[0], BlockCode::kOk);
  EXPECT_EQ(service_->Release(*a, std::vector<BlockKey>{K(2)})[0], BlockCode::kMissing);
  EXPECT_EQ(service_->Drop(*a, std::vector<BlockKey>{K(2)})[0], BlockCode::kOk);
}

TEST_F(ServiceTest, AFullT1AnswersRetryAndReservesNothing) {
  auto a = Open(Ns("m"));
  ASSERT_EQ(PutN(*a, 0, 16), std::vector<BlockCode>(16, BlockCode::kOk));
  std::vector<BlockKey> keys;
  for (uint64_t i = 0; i < 16; ++i) keys.push_back(K(i));
  ASSERT_EQ(GetSync(a, keys)[15].code, BlockCode::kOk);  // all leased: none can leave
  EXPECT_EQ(Begin(*a, {100})[0].code, BlockCode::kRetryLater);
  EXPECT_EQ(a->puts_pending(), 0u);
}

TEST_F(ServiceTest, WithoutPutVerificationTheChecksumIsNotCheckedAtCommit) {
  service_ = std::make_unique<Service>(*tiers_, *scope_, nullptr, nullptr,
                                       ServiceOptions{.verify_puts = false});
  auto a = Open(Ns("m"));
  std::vector<SlotResult> begun = Begin(*a, {5}, 4096);
  ASSERT_EQ(begun[0].code, BlockCode::kOk);
  EXPECT_EQ(service_->PutCommit(*a, std::vector<protocol::PutCommitItem>{{K(5), 12345}})[0],
            BlockCode::kOk);  // a later demotion would re-hash it against 12345 and drop it
}

// A commit of >= kParallelVerifyBytes is hashed on the pool: every good block still goes in, and
// a wrong one anywhere in the batch (first, middle, last) is still refused.
TEST_F(ServiceTest, ALargeCommitVerifiedInParallelRefusesEveryWrongBlockAndOnlyThose) {
  auto m = TierManager::Create(ManagerOptions(256, "", 0));
  ASSERT_TRUE(m.ok()) << m.status();
  service_.reset();
  tiers_ = std::move(*m);
  service_ = std::make_unique<Service>(*tiers_, *scope_, nullptr, nullptr,
                                       ServiceOptions{.verify_puts = true, .verify_threads = 3});
  auto a = Open(Ns("m"));
  const uint32_t bytes = testing::kTestSlot;
  const uint64_t n = kParallelVerifyBytes / bytes + 7;  // over the threshold
  ASSERT_LE(n, 256u);
  std::vector<uint64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 1000);
  std::vector<SlotResult> begun = Begin(*a, ids, bytes);
  std::vector<protocol::PutCommitItem> items;
  const std::set<uint64_t> wrong = {0, n / 2, n - 1};
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(begun[i].code, BlockCode::kOk);
    auto* data = reinterpret_cast<uint8_t*>(tiers_->t1().SlotData(begun[i].slot));
    testing::FillPayload(ids[i], data, bytes);
    items.push_back(protocol::PutCommitItem{K(ids[i]), XXH3_64bits(data, bytes)});
    if (wrong.count(i)) data[bytes - 1] ^= 0x80;
  }
  const std::vector<BlockCode> out = service_->PutCommit(*a, items);
  for (uint64_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i], wrong.count(i) ? BlockCode::kBadChecksum : BlockCode::kOk) << "block " << i;
  }
  EXPECT_EQ(tiers_->t1().Stats().used_slots, n - wrong.size());
}

// What the server puts in a Welcome and the dispatcher checks comes from the service, not from
// the tiers behind it: T1's segment and slot size, whether there is a T0, and the stats op.
TEST_F(ServiceTest, ClientsSeeTheTiersAndStatsThroughTheService) {
  EXPECT_EQ(service_->slot_bytes(), testing::kTestSlot);
  EXPECT_FALSE(service_->has_t0());
  EXPECT_FALSE(service_->t0_pool().has_value());
  const T1Segment t1 = service_->t1_segment();
  EXPECT_EQ(t1.fd, tiers_->t1().fd());
  EXPECT_EQ(t1.bytes, tiers_->t1().size());
  EXPECT_EQ(t1.slot_bytes, testing::kTestSlot);
  EXPECT_EQ(t1.slots, 16u);
  auto a = Open(Ns("m"));
  ASSERT_EQ(PutN(*a, 0, 3), std::vector<BlockCode>(3, BlockCode::kOk));
  ASSERT_EQ(GetSync(a, {K(0), K(1)})[1].code, BlockCode::kOk);
  const ServiceStats s = service_->Stats();
  EXPECT_EQ(s.t1_slots_total, 16u);
  EXPECT_EQ(s.t1_slots_free, 13u);
  EXPECT_EQ(s.leases_held, 2u);
  EXPECT_EQ(s.puts_committed, 3u);
  EXPECT_EQ(s.get_blocks, 2u);
  EXPECT_EQ(s.promotions, 0u);  // both were in T1
}

// put_begin answers each slot with the size asked (docs/protocol.md "Block results"); a key
// repeated in one request gets one slot, the repeat is present, and so is its commit's repeat.
TEST_F(ServiceTest, PutBeginGivesOneSlotPerKeyWithTheSizeAsked) {
  auto a = Open(Ns("m"));
  const std::vector<protocol::PutBeginItem> items = {
      {K(1), std::nullopt, 100}, {K(2), K(1), 200}, {K(1), std::nullopt, 100}};
  const std::vector<SlotResult> begun = service_->PutBegin(*a, items);
  ASSERT_EQ(begun[0].code, BlockCode::kOk);
  EXPECT_EQ(begun[0].payload_bytes, 100u);
  ASSERT_EQ(begun[1].code, BlockCode::kOk);
  EXPECT_EQ(begun[1].payload_bytes, 200u);
  EXPECT_NE(begun[1].slot, begun[0].slot);
  EXPECT_EQ(begun[2].code, BlockCode::kAlreadyPresent);
  EXPECT_EQ(begun[2].slot, kNoSlot);
  EXPECT_EQ(a->puts_pending(), 2u);
  EXPECT_EQ(service_->PutCommit(
                *a, std::vector<protocol::PutCommitItem>{{K(1), 0}, {K(2), 0}, {K(1), 0}}),
            (std::vector<BlockCode>{BlockCode::kOk, BlockCode::kOk, BlockCode::kAlreadyPresent}));
  EXPECT_EQ(Begin(*a, {1, 2})[1].code, BlockCode::kAlreadyPresent);  // cached now
}

// Gets, releases and puts of one session from several threads at once, then its close: the
// session's bookkeeping (under its absl::Mutex) stays exact. Under ThreadSanitizer this is the
// test that sees the session's locking (tests/common/tsan_absl_mutex.cc makes it visible).
TEST_F(ServiceTest, ConcurrentCallsOnOneSessionKeepItsLeasesExact) {
  auto writer = Open(Ns("m")), s = Open(Ns("m"));
  ASSERT_EQ(PutN(*writer, 0, 4), std::vector<BlockCode>(4, BlockCode::kOk));
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<BlockKey> keys = {K(0), K(1), K(2), K(3)};
      for (int r = 0; r < kRounds; ++r) {
        for (const SlotResult& got : GetSync(s, keys)) ASSERT_EQ(got.code, BlockCode::kOk);
        EXPECT_GE(s->leases_held(), keys.size());
        for (BlockCode released : service_->Release(*s, keys)) {
          ASSERT_EQ(released, BlockCode::kOk);
        }
        // A put of this thread's own key, begun and aborted: the open-put map under the same lock.
        const uint64_t id = 100 + static_cast<uint64_t>(t);
        ASSERT_EQ(Begin(*s, {id})[0].code, BlockCode::kOk);
        ASSERT_EQ(service_->PutAbort(*s, std::vector<BlockKey>{K(id)})[0], BlockCode::kOk);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(s->leases_held(), 0u);
  EXPECT_EQ(s->puts_pending(), 0u);
  EXPECT_EQ(service_->leases_held(), 0u);
  EXPECT_EQ(tiers_->index().Find(scope_->Scope(NamespaceRoot(Ns("m")), K(0)))->leases, 0u);
}

TEST(KeyScopeTest, TheSecretPersistsAndScopesDifferByNamespaceAndSecret) {
  TempDir tmp;
  const std::string path = tmp.path() + "/secret";
  auto first = KeyScope::Load(path);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = KeyScope::Load(path);
  ASSERT_TRUE(again.ok());
  const BlockKey root_a = NamespaceRoot(Ns("a")), root_b = NamespaceRoot(Ns("b"));
  EXPECT_EQ(first->Scope(root_a, K(1)), again->Scope(root_a, K(1)));
  EXPECT_NE(first->Scope(root_a, K(1)), first->Scope(root_b, K(1)));
  EXPECT_NE(first->Scope(root_a, K(1)), KeyScope::Load("")->Scope(root_a, K(1)));
  std::ofstream(path, std::ios::trunc) << "short";
  const absl::Status bad = KeyScope::Load(path).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.message().find(path), std::string::npos);
}

// A fleet's daemons load one secret file: the same keys on every host, namespaces apart as on one.
TEST(KeyScopeTest, ASharedSecretFileGivesEveryDaemonTheSameKeysAndIsNeverMadeUp) {
  TempDir tmp;
  const std::string path = tmp.path() + "/fleet.secret";
  const absl::Status missing = KeyScope::Load(path, /*must_exist=*/true).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find(path + ": no such file"), std::string::npos) << missing;
  EXPECT_FALSE(std::ifstream(path).good());  // not created
  std::ofstream(path, std::ios::binary) << std::string(KeyScope::kSecretBytes, 'k');
  auto host_a = KeyScope::Load(path, true), host_b = KeyScope::Load(path, true);
  ASSERT_TRUE(host_a.ok() && host_b.ok());
  const BlockKey root_a = NamespaceRoot(Ns("a")), root_b = NamespaceRoot(Ns("b"));
  EXPECT_EQ(host_a->Scope(root_a, K(7)), host_b->Scope(root_a, K(7)));
  EXPECT_NE(host_a->Scope(root_a, K(7)), host_b->Scope(root_b, K(7)));
}

TEST(LookupRecorderTest, RecordedLookupsReplay) {
  TempDir tmp;
  const std::string path = tmp.path() + "/lookups.jsonl";
  auto m = TierManager::Create(ManagerOptions(4, "", 0));
  ASSERT_TRUE(m.ok());
  KeyScope scope = *KeyScope::Load("");
  auto recorder = LookupRecorder::Open(path);
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  {
    Service service(**m, scope, recorder->get());
    auto s = *service.Open(Ns("m"));
    std::vector<TierMask> tiers(3);
    const std::vector<BlockKey> prefix = {K(0), K(1), K(2)};
    service.Lookup(*s, prefix, absl::MakeSpan(tiers));
    service.Lookup(*s, absl::MakeConstSpan(prefix).subspan(0, 2), absl::MakeSpan(tiers));
  }
  (*recorder)->Flush();
  replay::TraceLoadOptions options;
  options.block_tokens = 16;  // the namespace's; `kvtier replay --block-tokens 16`
  auto trace = replay::LoadTrace(path, options);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->request_begin.size(), 3u);  // two requests
  EXPECT_EQ(trace->refs.size(), 5u);
  EXPECT_EQ(trace->hash_ids.size(), 3u);  // the second lookup named the same blocks
  EXPECT_EQ((*recorder)->lines(), 2u);
  EXPECT_EQ(LookupRecorder::Open("/nonexistent-dir/x").status().message().find("--record"), 0u);
}

}  // namespace
}  // namespace kvtier
