// Real kvtierd processes and real client processes (DESIGN.md "Data flow", "Reliability rules"):
// several processes putting and getting each other's blocks with every byte checked, a prefix
// stored once when two processes store it at the same time, namespaces apart, clients SIGKILLed
// in the middle of their work leaving no lease, no slot and no partial block behind, and a client
// of a uid the daemon does not allow refused by SO_PEERCRED.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/daemon/kvtierd_test_util.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using testing::CheckAll;
using testing::CheckFound;
using testing::ChildCheck;
using testing::ItNamespace;
using testing::KvtierdProcess;
using testing::Pipe;
using testing::PutKeys;
using testing::RunChild;
using testing::SeqKeys;
using testing::WaitChild;

// The per-block codes of a keys call; empty when the call failed.
std::vector<uint32_t> Codes(const absl::StatusOr<std::vector<protocol::BlockResult>>& results) {
  std::vector<uint32_t> codes;
  if (results.ok()) {
    for (const protocol::BlockResult& r : *results) codes.push_back(r.code);
  }
  return codes;
}

class KvtierdIntegrationTest : public ::testing::Test {
 protected:
  // T1 of 1024 slots: nothing in these tests is evicted.
  void StartDaemon(std::vector<std::string> flags = {}) {
    const std::vector<std::string> base = {
        "--t1.capacity_bytes",  "16MiB", "--t1.slot_bytes",     "16KiB",
        "--t1.dma_chunk_bytes", "1MiB",  "--t1.touch_threads",  "1",
        "--t1.huge_pages",      "off",   "--t2.capacity_bytes", "16MiB"};
    flags.insert(flags.begin(), base.begin(), base.end());
    auto d = KvtierdProcess::Start(dir_.path(), flags);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // Whatever the test did to it, the daemon stops cleanly on SIGTERM (under ASan: nothing leaked).
  void TearDown() override {
    if (daemon_ == nullptr) return;
    const int status = daemon_->Stop(SIGTERM);
    EXPECT_TRUE(testing::ExitedZero(status))
        << "after SIGTERM: " << testing::DescribeWaitStatus(status) << "\n"
        << daemon_->Log();
  }

  std::unique_ptr<client::Client> Connect(const Namespace& ns = ItNamespace()) {
    auto c = testing::ConnectTo(*daemon_, ns, "test");
    EXPECT_TRUE(c.ok()) << c.status() << "\n" << daemon_->Log();
    return c.ok() ? std::move(*c) : nullptr;
  }

  static uint64_t UsedSlots(client::Client& c) {
    auto s = c.Stats();
    return s.ok() ? s->t1_slots_total - s->t1_slots_free : ~uint64_t{0};
  }
  static uint64_t LeasesHeld(client::Client& c) {
    auto s = c.Stats();
    return s.ok() ? s->leases_held : ~uint64_t{0};
  }

  // Children connect to the daemon themselves: a client is never shared across fork.
  absl::StatusOr<std::unique_ptr<client::Client>> ChildConnect(const Namespace& ns) {
    return testing::ConnectTo(*daemon_, ns, "child");
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
};

// Each process: a shared prefix (stored by whoever comes first), its own continuation of it, and
// a prefix of its own; then every other process's blocks, byte for byte.
TEST_F(KvtierdIntegrationTest, ClientProcessesPutAndGetEachOthersBlocksByteForByte) {
  StartDaemon();
  constexpr int kClients = 4;
  Pipe ready, go;
  auto keys_of = [](client::Client& c, int who) {
    const std::vector<BlockKey> shared = SeqKeys(c, 1, 8);
    std::vector<BlockKey> keys = shared;
    for (const BlockKey& k : SeqKeys(c, 100 + who, 6, shared.back())) keys.push_back(k);
    for (const BlockKey& k : SeqKeys(c, 200 + who, 5)) keys.push_back(k);
    return keys;
  };
  std::vector<pid_t> children;
  for (int who = 0; who < kClients; ++who) {
    children.push_back(RunChild([&, who] {
      auto c = ChildConnect(ItNamespace());
      int failed = ChildCheck(c.status(), "connect", 10);
      if (failed == 0) {
        const std::vector<BlockKey> keys = keys_of(**c, who);
        const std::vector<BlockKey> shared(keys.begin(), keys.begin() + 8);
        const std::vector<BlockKey> own(keys.begin() + 8, keys.begin() + 14);
        const std::vector<BlockKey> lone(keys.begin() + 14, keys.end());
        auto s = PutKeys(**c, shared);
        auto o = PutKeys(**c, own, shared.back());
        auto l = PutKeys(**c, lone);
        failed = ChildCheck(s.status(), "put shared", 11) + ChildCheck(o.status(), "put own", 12) +
                 ChildCheck(l.status(), "put lone", 13);
        for (size_t i = 0; failed == 0 && i < 8; ++i) {
          if ((*s)[i] != BlockCode::kOk && (*s)[i] != BlockCode::kAlreadyPresent) failed = 14;
        }
        if (failed == 0 && (*o != std::vector<BlockCode>(6, BlockCode::kOk) ||
                            *l != std::vector<BlockCode>(5, BlockCode::kOk))) {
          failed = 15;
        }
      }
      ready.Signal();
      if (!go.Await() || failed != 0) return failed != 0 ? failed : 16;
      for (int other = 0; other < kClients; ++other) {
        const std::vector<BlockKey> keys = keys_of(**c, other);
        auto hit = (*c)->Lookup(std::vector<BlockKey>(keys.begin(), keys.begin() + 14));
        if (!hit.ok() || hit->hit_blocks != 14) return 17;
        if (int bad = ChildCheck(CheckAll(**c, keys), "check", 18)) return bad;
      }
      return 0;
    }));
  }
  ASSERT_TRUE(ready.Await(kClients)) << daemon_->Log();
  go.Signal(kClients);
  for (pid_t child : children) {
    const int status = WaitChild(child);
    EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
  }
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(UsedSlots(*c), 8u + kClients * (6 + 5));
  EXPECT_EQ(c->Stats()->puts_committed, 8u + kClients * (6 + 5));
  EXPECT_EQ(LeasesHeld(*c), 0u);
}

// Two processes, let go at once, store the same 32 blocks: each block is stored by exactly one
// of them (the other is told kAlreadyPresent) and takes one T1 slot.
TEST_F(KvtierdIntegrationTest, TwoProcessesStoringOnePrefixStoreItOnce) {
  StartDaemon();
  constexpr uint32_t kBlocks = 32;
  Pipe ready, go;
  std::vector<pid_t> children;
  for (int who = 0; who < 2; ++who) {
    children.push_back(RunChild([&] {
      auto c = ChildConnect(ItNamespace());
      ready.Signal();
      if (!go.Await() || ChildCheck(c.status(), "connect", 100) != 0) return 100;
      auto codes = PutKeys(**c, SeqKeys(**c, 7, kBlocks));
      if (ChildCheck(codes.status(), "put", 101) != 0) return 101;
      int stored = 0;
      for (BlockCode code : *codes) {
        if (code == BlockCode::kOk) ++stored;
        if (code != BlockCode::kOk && code != BlockCode::kAlreadyPresent) return 102;
      }
      return stored;  // the exit code: how many blocks this process stored
    }));
  }
  ASSERT_TRUE(ready.Await(2));
  go.Signal(2);
  int stored = 0;
  for (pid_t child : children) {
    const int status = WaitChild(child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) <= static_cast<int>(kBlocks))
        << testing::DescribeWaitStatus(status);
    stored += WEXITSTATUS(status);
  }
  EXPECT_EQ(stored, static_cast<int>(kBlocks));
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(UsedSlots(*c), kBlocks);
  EXPECT_EQ(c->Stats()->puts_committed, kBlocks);
  EXPECT_TRUE(CheckAll(*c, SeqKeys(*c, 7, kBlocks)).ok());
}

// The same tokens under two namespaces are two blocks; neither namespace can name, get or drop
// the other's, not even by passing its raw keys; a process of the second namespace sees only its.
TEST_F(KvtierdIntegrationTest, NamespacesAreApartAcrossProcesses) {
  StartDaemon();
  auto a = Connect(ItNamespace("tenant-a"));
  auto b = Connect(ItNamespace("tenant-b"));
  ASSERT_TRUE(a != nullptr && b != nullptr);
  const std::vector<BlockKey> a_keys = SeqKeys(*a, 3, 10), b_keys = SeqKeys(*b, 3, 10);
  ASSERT_EQ(*PutKeys(*a, a_keys), std::vector<BlockCode>(10, BlockCode::kOk));
  EXPECT_EQ(b->Lookup(b_keys)->hit_blocks, 0u);
  EXPECT_EQ(b->Lookup(a_keys)->hit_blocks, 0u);  // a's raw keys name nothing in b
  EXPECT_EQ(Codes(b->Get(a_keys)), std::vector<uint32_t>(10, uint32_t(BlockCode::kMissing)));
  EXPECT_EQ(Codes(b->Drop(a_keys)), std::vector<uint32_t>(10, uint32_t(BlockCode::kMissing)));
  EXPECT_EQ(*PutKeys(*b, b_keys), std::vector<BlockCode>(10, BlockCode::kOk));  // not present
  EXPECT_EQ(UsedSlots(*a), 20u);
  const pid_t child = RunChild([&] {
    auto c = ChildConnect(ItNamespace("tenant-b"));
    if (ChildCheck(c.status(), "connect", 1) != 0) return 1;
    if (ChildCheck(CheckAll(**c, b_keys), "b's blocks", 2) != 0) return 2;
    auto hit = (*c)->Lookup(a_keys);
    return hit.ok() && hit->hit_blocks == 0 ? 0 : 3;
  });
  const int status = WaitChild(child);
  EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
  EXPECT_TRUE(CheckAll(*a, a_keys).ok());  // a's own, unchanged
}

// A client holding leases (a get) and an open put with half its payload written dies by SIGKILL:
// the daemon gives back every lease and the put's slot, and the half-written block never shows.
TEST_F(KvtierdIntegrationTest, AClientKilledMidGetAndMidPutLeavesNoLeaseAndNoPartialBlock) {
  StartDaemon();
  auto watcher = Connect();
  ASSERT_NE(watcher, nullptr);
  const std::vector<BlockKey> base = SeqKeys(*watcher, 5, 6);
  const std::vector<BlockKey> open = SeqKeys(*watcher, 6, 1);
  ASSERT_EQ(*PutKeys(*watcher, base), std::vector<BlockCode>(6, BlockCode::kOk));
  const uint64_t used = UsedSlots(*watcher);
  Pipe ready;
  const pid_t child = RunChild([&] {
    auto c = ChildConnect(ItNamespace());
    if (!c.ok() || !(*c)->Get(base).ok()) return 1;
    const std::vector<std::byte> payload = testing::Payload(open[0]);
    auto begun = (*c)->PutBegin(std::vector<protocol::PutBeginItem>{
        {open[0], std::nullopt, static_cast<uint32_t>(payload.size())}});
    if (!begun.ok() || (*begun)[0].code != 0) return 2;
    std::memcpy((*c)->MutableSlotData((*begun)[0].slot), payload.data(), payload.size() / 2);
    ready.Signal();
    for (;;) ::pause();  // until the parent's SIGKILL, holding all of it
  });
  ASSERT_TRUE(ready.Await());
  EXPECT_EQ(LeasesHeld(*watcher), 6u);       // the child's, seen from another process
  EXPECT_EQ(UsedSlots(*watcher), used + 1);  // + the open put's slot
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  const int status = WaitChild(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << testing::DescribeWaitStatus(status);
  EXPECT_TRUE(testing::Eventually([&] { return LeasesHeld(*watcher) == 0; }));
  EXPECT_TRUE(testing::Eventually([&] { return UsedSlots(*watcher) == used; }));
  EXPECT_EQ(watcher->Lookup(open)->hit_blocks, 0u);
  EXPECT_EQ((*watcher->Get(open))[0].code, uint32_t(BlockCode::kMissing));
  EXPECT_EQ(Codes(watcher->Drop(base)), std::vector<uint32_t>(6, uint32_t(BlockCode::kOk)));
}

// Clients that put and get in a loop are SIGKILLed at whatever point they reached: afterwards no
// lease is held, every block that shows is whole and correct, every put that returned shows, and
// T1 holds exactly the blocks that show (no slot of an unfinished put is left behind).
TEST_F(KvtierdIntegrationTest, ClientsKilledAtAnyPointLeaveOnlyWholeBlocks) {
  StartDaemon();
  auto watcher = Connect();
  ASSERT_NE(watcher, nullptr);
  const std::vector<BlockKey> base = SeqKeys(*watcher, 9, 4);
  ASSERT_EQ(*PutKeys(*watcher, base), std::vector<BlockCode>(4, BlockCode::kOk));
  uint64_t blocks = base.size();
  for (uint32_t round = 0; round < 3; ++round) {
    const uint32_t first_seed = 10000 * (round + 1);
    Pipe progress;
    const pid_t child = RunChild([&] {
      auto c = ChildConnect(ItNamespace());
      if (!c.ok()) return 1;
      for (uint32_t seed = first_seed;; ++seed) {
        const std::vector<BlockKey> keys = SeqKeys(**c, seed, 3);
        if (!PutKeys(**c, keys).ok() || !CheckAll(**c, keys).ok() || !CheckAll(**c, base).ok()) {
          return 2;
        }
        progress.Signal();  // this seed's blocks are all stored
      }
    });
    ASSERT_TRUE(progress.Await(3 + 5 * round));  // a different point in its loop each round
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    const int status = WaitChild(child);
    ASSERT_TRUE(WIFSIGNALED(status)) << testing::DescribeWaitStatus(status);
    const uint32_t done = 3 + 5 * round + static_cast<uint32_t>(progress.Drain());
    EXPECT_TRUE(testing::Eventually([&] { return LeasesHeld(*watcher) == 0; }));
    for (uint32_t seed = first_seed; seed <= first_seed + done; ++seed) {
      std::vector<bool> found;
      const std::vector<BlockKey> keys = SeqKeys(*watcher, seed, 3);
      ASSERT_TRUE(CheckFound(*watcher, keys, &found).ok()) << "seed " << seed;
      for (size_t i = 0; i < keys.size(); ++i) {
        const bool finished = seed < first_seed + done;  // its Put had returned before the kill
        EXPECT_TRUE(found[i] || !finished) << "seed " << seed << " block " << i;
        blocks += found[i] ? 1 : 0;
      }
    }
    EXPECT_TRUE(testing::Eventually([&] { return UsedSlots(*watcher) == blocks; }))
        << UsedSlots(*watcher) << " slots used for " << blocks << " blocks";
  }
}

// With a T1 of 64 slots and 128 blocks, a client's gets promote blocks from T2 as it reads; it is
// SIGKILLed with gets (and promotions) in flight: every lease comes back, every block stays whole.
TEST_F(KvtierdIntegrationTest, AClientKilledWhileItsGetsPromoteFromT2LeavesNoLease) {
  StartDaemon({"--t1.capacity_bytes", "1MiB"});
  auto watcher = Connect();
  ASSERT_NE(watcher, nullptr);
  constexpr uint32_t kSequences = 8, kBlocks = 16;
  for (uint32_t s = 0; s < kSequences; ++s) {
    ASSERT_TRUE(testing::PutRetrying(*watcher, SeqKeys(*watcher, 20 + s, kBlocks)).ok());
  }
  Pipe progress;
  const pid_t child = RunChild([&] {
    auto c = ChildConnect(ItNamespace());
    if (!c.ok()) return 1;
    for (uint32_t n = 0;; ++n) {
      const absl::Status check =
          CheckFound(**c, SeqKeys(**c, 20 + n % kSequences, kBlocks), nullptr);
      if (ChildCheck(check, "get", 2) != 0) return 2;
      progress.Signal();
    }
  });
  ASSERT_TRUE(progress.Await(kSequences + 3));  // past a whole round: T2 promotions under way
  EXPECT_GT(watcher->Stats()->promotions, 0u);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  const int status = WaitChild(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << testing::DescribeWaitStatus(status);
  EXPECT_TRUE(testing::Eventually([&] { return LeasesHeld(*watcher) == 0; }));
  for (uint32_t s = 0; s < kSequences; ++s) {
    const std::vector<BlockKey> keys = SeqKeys(*watcher, 20 + s, kBlocks);
    // Every block is still cached (T2 never evicts here); a get may find T1 momentarily full.
    EXPECT_TRUE(testing::Eventually([&] {
      std::vector<bool> found;
      const absl::Status check = CheckFound(*watcher, keys, &found);
      EXPECT_TRUE(check.ok()) << "sequence " << s << ": " << check;
      return !check.ok() || std::find(found.begin(), found.end(), false) == found.end();
    })) << "sequence "
        << s;
  }
}

// The socket is open to everyone (mode 0666, a traversable directory); the daemon still refuses a
// uid that is neither its own, root, nor allowed, by SO_PEERCRED, and goes on serving the others.
TEST_F(KvtierdIntegrationTest, AClientWhoseUidIsNotAllowedIsRefused) {
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  StartDaemon({"--daemon.socket_mode", "0666"});
  const pid_t child = RunChild([&] {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 3;
    auto c = ChildConnect(ItNamespace());
    if (!c.ok() && c.status().code() == absl::StatusCode::kPermissionDenied) return 0;
    std::fprintf(stderr, "child: %s\n", c.status().ToString().c_str());
    return 1;
  });
  const int status = WaitChild(child);
  ASSERT_TRUE(WIFEXITED(status)) << testing::DescribeWaitStatus(status);
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot switch to uid 65534 here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(daemon_->Log().find("uid 65534 gid 65534"), std::string::npos) << daemon_->Log();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(*PutKeys(*c, SeqKeys(*c, 4, 2)), std::vector<BlockCode>(2, BlockCode::kOk));
}

}  // namespace
}  // namespace kvtier

namespace kvtier {
namespace {

// LookupMany pipelines lookups through a sliding window of arena parts: more sequences than the
// window (256), each answered as Lookup answers it alone; an empty sequence has no hit, and one
// longer than max_batch (1024 keys) is looked up on its own.
TEST_F(KvtierdIntegrationTest, LookupManyAnswersEverySequenceAsLookupDoes) {
  StartDaemon();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  std::vector<std::vector<BlockKey>> seqs;
  for (uint32_t s = 0; s < 20; ++s) {
    seqs.push_back(SeqKeys(*c, s + 1, 8));
    const std::vector<BlockKey> stored(seqs.back().begin(), seqs.back().begin() + s % 9);
    if (!stored.empty()) {
      ASSERT_TRUE(PutKeys(*c, stored).ok());
    }
  }
  seqs.push_back(SeqKeys(*c, 99, 1100));
  ASSERT_TRUE(PutKeys(*c, {seqs.back().begin(), seqs.back().begin() + 3}).ok());
  seqs.emplace_back();  // empty
  std::vector<absl::Span<const BlockKey>> many;
  for (size_t i = 0; i < 700; ++i) many.emplace_back(seqs[(i * 7) % seqs.size()]);
  absl::StatusOr<std::vector<client::LookupResult>> got = c->LookupMany(many);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), many.size());
  size_t hits = 0;
  for (size_t i = 0; i < many.size(); ++i) {
    absl::StatusOr<client::LookupResult> alone = c->Lookup(many[i]);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ((*got)[i].hit_blocks, alone->hit_blocks) << "sequence " << i;
    EXPECT_EQ((*got)[i].tiers, alone->tiers) << "sequence " << i;
    hits += alone->hit_blocks;
  }
  EXPECT_GT(hits, 0u);
  EXPECT_TRUE(c->LookupMany({})->empty());
  // The client is still in step with the daemon after the window wrapped.
  EXPECT_EQ(c->Lookup(seqs[3])->hit_blocks, 3u);
}

}  // namespace
}  // namespace kvtier
