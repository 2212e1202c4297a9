// Eviction policies: hand-checked victim sequences for every policy, can_evict skipping, edge
// cases, config validation, and a randomized consistency check against a shadow set.
//
// Calling convention used throughout (the one `kvtier replay` and the tiers use): a hit calls
// Touch; a miss calls Insert and then Evict while the policy holds more than the capacity. The
// policies make the latest Insert wait out that first Evict, so the victims are the ones the
// papers' "make room, then insert" order gives; every derivation below follows the papers'
// definitions.
#include "index/eviction_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace kvtier {
namespace {

const std::vector<std::string> kAllPolicies = {"lru", "fifo", "sieve", "s3fifo", "arc"};

bool AcceptAll(BlockId) { return true; }

std::unique_ptr<EvictionPolicy> Make(const std::string& name, size_t capacity,
                                     double small_fraction = 0.1) {
  EvictionConfig config;
  config.policy = name;
  config.capacity_blocks = capacity;
  config.s3fifo_small_fraction = small_fraction;
  auto policy = MakeEvictionPolicy(config);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return std::move(policy).value();
}

// Drives a policy like a cache of `capacity` blocks (block id = ghost key) and records the victims.
// Residency is kept across Run calls, so a test can replay in steps.
class Cache {
 public:
  Cache(EvictionPolicy* policy, size_t capacity) : policy_(policy), capacity_(capacity) {}

  std::vector<BlockId> Run(const std::vector<BlockId>& accesses) {
    std::vector<BlockId> victims;
    for (BlockId id : accesses) {
      if (id >= resident_.size()) resident_.resize(id + 1, false);
      if (resident_[id]) {
        policy_->Touch(id);
        continue;
      }
      policy_->Insert(id, id);
      resident_[id] = true;
      while (policy_->Size() > capacity_) {
        std::optional<BlockId> victim = policy_->Evict(AcceptAll);
        if (!victim) {
          ADD_FAILURE() << "no victim while over capacity";
          return victims;
        }
        resident_[*victim] = false;
        victims.push_back(*victim);
      }
    }
    return victims;
  }

 private:
  EvictionPolicy* policy_;
  size_t capacity_;
  std::vector<bool> resident_;
};

std::vector<BlockId> Replay(EvictionPolicy& policy, size_t capacity,
                            const std::vector<BlockId>& accesses) {
  return Cache(&policy, capacity).Run(accesses);
}

std::vector<BlockId> Drain(EvictionPolicy& policy) {
  std::vector<BlockId> victims;
  while (auto victim = policy.Evict(AcceptAll)) victims.push_back(*victim);
  return victims;
}

using Ids = std::vector<BlockId>;

// EvictAny is Evict with every id allowed (index/eviction_policy.h), which replay relies on for
// its victims: the same victim sequence over a random mix of hits, misses and erasures, for every
// policy, LRU's override included. Two instances, one evicting each way, must never differ.
TEST(EvictionPolicyTest, EvictAnyPicksWhatEvictWithEveryIdAllowedPicks) {
  for (const std::string& name : kAllPolicies) {
    auto a = Make(name, 64), b = Make(name, 64);
    std::mt19937_64 rng(7);
    std::vector<bool> resident(512, false);
    size_t size = 0, evictions = 0;
    for (int step = 0; step < 20000; ++step) {
      const auto id = static_cast<BlockId>(rng() % 512);
      if (resident[id]) {
        if (rng() % 16 == 0) {
          a->Erase(id);
          b->Erase(id);
          resident[id] = false;
          --size;
        } else {
          a->Touch(id);
          b->Touch(id);
        }
        continue;
      }
      a->Insert(id, id);
      b->Insert(id, id);
      resident[id] = true;
      ++size;
      while (size > 64) {
        const std::optional<BlockId> va = a->Evict(AcceptAll);
        const std::optional<BlockId> vb = b->EvictAny();
        ASSERT_EQ(va, vb) << name << " at step " << step;
        ASSERT_TRUE(va.has_value()) << name;
        resident[*va] = false;
        --size;
        ++evictions;
      }
    }
    EXPECT_GT(evictions, 1000u) << name;
  }
}

// ---- Hand-checked sequences -------------------------------------------------------------------

TEST(LruPolicyTest, EvictsLeastRecentlyUsed) {
  // Capacity 3, order least -> most recent:
  //   1 2 3 -> [1 2 3]; hit 1 -> [2 3 1]; 4 evicts 2 -> [3 1 4]; 2 evicts 3 -> [1 4 2];
  //   5 evicts 1 -> [4 2 5]; 3 evicts 4 -> [2 5 3].
  auto lru = Make("lru", 3);
  EXPECT_EQ(Replay(*lru, 3, {1, 2, 3, 1, 4, 2, 5, 3}), (Ids{2, 3, 1, 4}));
  EXPECT_EQ(Drain(*lru), (Ids{2, 5, 3}));
}

TEST(FifoPolicyTest, EvictsInInsertionOrderIgnoringHits) {
  // Capacity 3: 1 2 3 -> [1 2 3]; hit 1 changes nothing; 4 evicts 1 -> [2 3 4]; hit 2;
  //   5 evicts 2 -> [3 4 5]; hit 3; 1 evicts 3 -> [4 5 1].
  auto fifo = Make("fifo", 3);
  EXPECT_EQ(Replay(*fifo, 3, {1, 2, 3, 1, 4, 2, 5, 3, 1}), (Ids{1, 2, 3}));
  EXPECT_EQ(Drain(*fifo), (Ids{4, 5, 1}));
}

TEST(SievePolicyTest, HandSparesVisitedAndRestsAfterVictim) {
  // Capacity 3, queue oldest -> newest, * = visited, ^ = hand:
  //   1 2 3 -> [1 2 3]; hit 1 -> [1* 2 3].
  //   4: hand starts at the oldest, clears 1, evicts 2, rests on 3 -> [1 ^3 4].
  //   2: evicts 3 (unvisited), hand -> 4 -> [1 ^4 2].   5: evicts 4 -> [1 ^2 5].
  //   3: evicts 2 -> [1 ^5 3].   hit 1 -> [1* ^5 3].   6: evicts 5 -> [1* ^3 6].
  auto sieve = Make("sieve", 3);
  EXPECT_EQ(Replay(*sieve, 3, {1, 2, 3, 1, 4, 2, 5, 3, 1, 6}), (Ids{2, 3, 4, 2, 5}));
  // Drain: 3, 6, then the hand wraps to 1, clears it, and takes it on the next lap.
  EXPECT_EQ(Drain(*sieve), (Ids{3, 6, 1}));
}

TEST(SievePolicyTest, HandWrapsAfterClearingEveryone) {
  // Capacity 3: 1 2 3, all hit -> [1* 2* 3*]. 4: the hand clears 1, 2, 3, wraps and evicts 1 (4
  // enters only after the room is made, as in the paper, so it is not a candidate) -> [^2 3 4].
  // 5: evicts 2 -> [^3 4 5]. hit 4. 6: evicts 3 -> [^4* 5 6]. 7: clears 4, evicts 5.
  auto sieve = Make("sieve", 3);
  EXPECT_EQ(Replay(*sieve, 3, {1, 2, 3, 1, 2, 3, 4, 5, 4, 6, 7}), (Ids{1, 2, 3, 5}));
}

TEST(S3FifoPolicyTest, SmallMainAndGhostQueues) {
  // Capacity 4, small fraction 0.25: S target 1, M target 3, G holds 3 keys. Evict from M when
  // |M| > 3 or S is empty, else from S; S's tail moves to M when touched twice (freq >= 2).
  //   1 2 3 4 -> S=[1 2 3 4].
  //   5: M=0 -> from S: 1 (freq 0) evicted, G=[1]. S=[2 3 4 5].
  //   hits 2 2 3 -> freq(2)=2, freq(3)=1.
  //   6: from S: 2 moves to M (freq 0), 3 evicted, G=[1 3]. S=[4 5 6], M=[2].
  //   1: ghost hit -> M; G=[3]. From S: 4 evicted, G=[3 4]. S=[5 6], M=[2 1].
  //   3: ghost hit -> M; G=[4]. From S: 5 evicted, G=[4 5]. S=[6], M=[2 1 3].
  //   hit 2 -> freq(2)=1.
  //   7: |M|=3 -> from S: 6 evicted, G=[4 5 6]. S=[7].
  //   4: ghost hit -> M; G=[5 6]. From S: 7 evicted, G=[5 6 7]. S=[], M=[2 1 3 4].
  //   8: |M|=4 > 3 -> from M: 2 has freq 1 -> back with 0, M=[1 3 4 2]; 1 evicted (no ghost).
  auto s3 = Make("s3fifo", 4, 0.25);
  EXPECT_EQ(Replay(*s3, 4, {1, 2, 3, 4, 5, 2, 2, 3, 6, 1, 3, 2, 7, 4, 8}),
            (Ids{1, 3, 4, 5, 6, 7, 1}));
  // S=[8], M=[3 4 2]: |M| <= 3 and S non-empty -> 8 first, then M in order.
  EXPECT_EQ(Drain(*s3), (Ids{8, 3, 4, 2}));
}

TEST(S3FifoPolicyTest, GhostQueueIsBounded) {
  // Capacity 4, fraction 0.25: G keeps the 3 newest ghost keys.
  // 1 2 3 4, then 5 6 7 8 evict 1 2 3 4 from S (G=[2 3 4] after 4 enters). 1 is forgotten: it comes
  // back into S and is the next victim; 4 is remembered: it goes to M and survives.
  auto s3 = Make("s3fifo", 4, 0.25);
  Cache cache(s3.get(), 4);
  EXPECT_EQ(cache.Run({1, 2, 3, 4, 5, 6, 7, 8}), (Ids{1, 2, 3, 4}));
  // 1: S=[5 6 7 8] -> from S: 5 evicted; S=[6 7 8 1], G=[3 4 5].
  // 4: ghost hit -> M; from S: 6 evicted. S=[7 8 1], M=[4].
  // 9: from S: 7, then 10: 8, then 11: 1 (S's tail), M=[4] untouched.
  EXPECT_EQ(cache.Run({1, 4, 9, 10, 11}), (Ids{5, 6, 7, 8, 1}));
}

TEST(ArcPolicyTest, AdaptsTargetOnGhostHits) {
  // Capacity c = 3, p = 0. Lists LRU -> MRU.
  //   1 2 3 -> T1=[1 2 3].  hit 1 -> T1=[2 3], T2=[1].
  //   4: |T1|=2 > p=0 -> REPLACE takes T1's LRU 2 into B1. T1=[3 4], T2=[1], B1=[2].
  //   2: B1 hit, p += max(1, |B2|/|B1| = 0) -> p=1; |T1|=2 > 1 -> 3 into B1; 2 to T2.
  //      T1=[4], T2=[1 2], B1=[3].
  //   5: |T1|=1, not > p=1 -> T2's LRU 1 into B2. T1=[4 5], T2=[2], B1=[3], B2=[1].
  //   1: B2 hit, p -= max(1, |B1|/|B2| = 1) -> p=0; |T1|=2 > 0 -> 4 into B1; 1 to T2.
  //      T1=[5], T2=[2 1], B1=[3 4].
  //   6: case IV-A, |T1|+|B1| = 3 = c -> drop B1's LRU 3; |T1|=1 > 0 -> 5 into B1.
  //      T1=[6], T2=[2 1], B1=[4 5].
  auto arc = Make("arc", 3);
  Cache cache(arc.get(), 3);
  EXPECT_EQ(cache.Run({1, 2, 3, 1, 4, 2, 5, 1, 6}), (Ids{2, 3, 1, 4, 5}));
  //   4: B1 hit, p += max(1, 0/2) -> p=1; |T1|=1, not > 1 -> T2's LRU 2 into B2. T1=[6], T2=[1 4].
  //   7: |T1|+|B1| = 1+1 (+7) <= 3, no trim; |T1|=1 not > 1 -> T2's LRU 1 into B2.
  //      T1=[6 7], T2=[4].
  EXPECT_EQ(cache.Run({4, 7}), (Ids{2, 1}));
  // T1 first while |T1|=2 > p=1: 6; then |T1|=1 = p -> T2: 4; then T1: 7.
  EXPECT_EQ(Drain(*arc), (Ids{6, 4, 7}));
}

// ---- Skipping with can_evict -----------------------------------------------------------------

struct SkipCase {
  std::string policy;
  Ids victims;  // of: insert 1 2 3 4; Evict(reject 1); then drain
};

TEST(EvictionPolicyTest, RejectedBlockKeepsItsPlace) {
  // Every policy evicts 2 when 1 is rejected. Then 1 is still the oldest: LRU, FIFO, S3-FIFO (S's
  // tail) and ARC (T1's LRU) take it next. SIEVE's hand has moved past it to 3 and comes back to 1
  // after one lap; 1 is still in place (unvisited), so it is taken when the hand wraps.
  const std::vector<SkipCase> cases = {{"lru", {2, 1, 3, 4}},
                                       {"fifo", {2, 1, 3, 4}},
                                       {"sieve", {2, 3, 4, 1}},
                                       {"s3fifo", {2, 1, 3, 4}},
                                       {"arc", {2, 1, 3, 4}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.policy);
    auto policy = Make(c.policy, 4, 0.25);
    for (BlockId id : {1, 2, 3, 4}) policy->Insert(id, id);
    Ids victims;
    victims.push_back(policy->Evict([](BlockId id) { return id != 1; }).value());
    for (BlockId id : Drain(*policy)) victims.push_back(id);
    EXPECT_EQ(victims, c.victims);
  }
}

TEST(SievePolicyTest, RejectedBlockKeepsVisitedBit) {
  // [1* 2 3* 4*]. Evict(reject 1): 1 is passed over with its bit, 2 goes, hand on 3.
  // Evict: clears 3 and 4, wraps to 1, which is still visited: cleared and spared; 3 goes.
  // (Had the rejection cleared 1's bit, 1 would go here.) Then 4, then 1.
  auto sieve = Make("sieve", 4);
  for (BlockId id : {1, 2, 3, 4}) sieve->Insert(id, id);
  for (BlockId id : {1, 3, 4}) sieve->Touch(id);
  EXPECT_EQ(sieve->Evict([](BlockId id) { return id != 1; }), 2u);
  EXPECT_EQ(Drain(*sieve), (Ids{3, 4, 1}));
}

TEST(S3FifoPolicyTest, RejectedBlockIsNotAged) {
  // Capacity 4, fraction 0.25. 1 3 4 go through S into G, come back as ghost hits into M, and 1 is
  // touched three times: M=[1(f3) 3 4], S empty.
  auto s3 = Make("s3fifo", 4, 0.25);
  for (BlockId id : {1, 3, 4}) s3->Insert(id, id);
  EXPECT_EQ(Drain(*s3), (Ids{1, 3, 4}));
  for (BlockId id : {1, 3, 4}) s3->Insert(id, id);
  for (int i = 0; i < 3; ++i) s3->Touch(1);
  // S empty -> from M: 1 rejected (keeps freq 3 and its place), 3 evicted.
  EXPECT_EQ(s3->Evict([](BlockId id) { return id != 1; }), 3u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s3->Evict([](BlockId) { return false; }), std::nullopt);
  // Had the rejections spent 1's frequency, 1 would go now; it still has 3, so 4 goes first.
  EXPECT_EQ(s3->Evict(AcceptAll), 4u);
  EXPECT_EQ(s3->Evict(AcceptAll), 1u);
}

TEST(EvictionPolicyTest, AllRejectedReturnsNulloptAndChangesNothing) {
  // Two copies get the same random history; one also sees Evict calls that reject everything. Both
  // must then give the same victims in the same order.
  for (const auto& name : kAllPolicies) {
    SCOPED_TRACE(name);
    auto a = Make(name, 8, 0.25);
    auto b = Make(name, 8, 0.25);
    std::mt19937 rng(7);
    std::vector<BlockId> accesses;
    for (int i = 0; i < 200; ++i) accesses.push_back(rng() % 16);
    std::vector<BlockId> first(accesses.begin(), accesses.begin() + 100);
    std::vector<BlockId> rest(accesses.begin() + 100, accesses.end());
    Cache cache_a(a.get(), 8);
    Cache cache_b(b.get(), 8);
    EXPECT_EQ(cache_a.Run(first), cache_b.Run(first));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(a->Evict([](BlockId) { return false; }), std::nullopt);
    EXPECT_EQ(a->Size(), b->Size());
    EXPECT_EQ(cache_a.Run(rest), cache_b.Run(rest));
    EXPECT_EQ(Drain(*a), Drain(*b));
  }
}

// ---- Edges -----------------------------------------------------------------------------------

TEST(EvictionPolicyTest, EmptyPolicyEvictsNothing) {
  for (const auto& name : kAllPolicies) {
    auto policy = Make(name, 4);
    EXPECT_EQ(policy->Evict(AcceptAll), std::nullopt) << name;
    EXPECT_EQ(policy->Size(), 0u) << name;
  }
}

TEST(EvictionPolicyTest, LatestInsertIsVictimOnlyWhenNothingElseMayGo) {
  for (const auto& name : kAllPolicies) {
    SCOPED_TRACE(name);
    auto policy = Make(name, 4);
    policy->Insert(5, 5);
    EXPECT_EQ(policy->Size(), 1u);
    EXPECT_EQ(policy->Evict(AcceptAll), 5u);  // the only block
    policy->Insert(1, 1);
    policy->Insert(2, 2);
    EXPECT_EQ(policy->Evict([](BlockId id) { return id != 1; }), 2u);
    EXPECT_EQ(policy->Evict([](BlockId id) { return id != 1; }), std::nullopt);
    EXPECT_EQ(policy->Evict(AcceptAll), 1u);
    EXPECT_EQ(policy->Size(), 0u);
  }
}

TEST(EvictionPolicyTest, IdsAreReusedAfterEvictionAndErase) {
  for (const auto& name : kAllPolicies) {
    SCOPED_TRACE(name);
    auto policy = Make(name, 2);
    policy->Insert(0, 100);
    policy->Insert(1, 101);
    policy->Touch(0);
    BlockId gone = policy->Evict(AcceptAll).value();
    policy->Insert(gone, 200);  // the same id, now another block
    policy->Erase(1 - gone);
    policy->Insert(1 - gone, 201);
    EXPECT_EQ(policy->Size(), 2u);
    Ids drained = Drain(*policy);
    std::sort(drained.begin(), drained.end());
    EXPECT_EQ(drained, (Ids{0, 1}));
  }
}

TEST(S3FifoPolicyTest, EraseLeavesNoGhost) {
  // 1 erased and reinserted goes to S's tail like a new block: evicted after 2 3 4. (Had 1 been
  // evicted, its ghost would send it to M and it would outlive 5.)
  auto s3 = Make("s3fifo", 4, 0.25);
  for (BlockId id : {1, 2, 3, 4}) s3->Insert(id, id);
  s3->Erase(1);
  s3->Insert(1, 1);  // S=[2 3 4 1]
  EXPECT_EQ(Replay(*s3, 4, {5, 6, 7, 8}), (Ids{2, 3, 4, 1}));
}

TEST(ArcPolicyTest, EraseLeavesNoGhost) {
  // T1=[2 3] after erasing 1; 1 comes back into T1 (no B1 hit, p stays 0): victims 2, 3, 1.
  // (Had 1 been evicted, the B1 hit would put it in T2 with p=1, and 4 would go before it.)
  auto arc = Make("arc", 3);
  for (BlockId id : {1, 2, 3}) arc->Insert(id, id);
  arc->Erase(1);
  arc->Insert(1, 1);
  EXPECT_EQ(Replay(*arc, 3, {4, 5, 6}), (Ids{2, 3, 1}));
}

// ---- Config ----------------------------------------------------------------------------------

TEST(EvictionConfigTest, ValidateNamesTheField) {
  EvictionConfig config;
  EXPECT_TRUE(config.Validate().ok());
  config.policy = "xyz";
  EXPECT_EQ(config.Validate().message(),
            "eviction.policy: unknown policy 'xyz' (expected lru, fifo, sieve, s3fifo, arc)");
  EXPECT_EQ(config.Validate().code(), absl::StatusCode::kInvalidArgument);
  config.policy = "s3fifo";
  config.capacity_blocks = 0;
  EXPECT_EQ(config.Validate().message(), "eviction.capacity_blocks: must be > 0 (got 0)");
  config.capacity_blocks = 10;
  for (double bad : {0.0, 1.0, -0.5, std::nan("")}) {
    config.s3fifo_small_fraction = bad;
    EXPECT_TRUE(absl::StartsWith(config.Validate().message(), "eviction.s3fifo_small_fraction: "))
        << config.Validate();
  }
  config.s3fifo_small_fraction = 1.5;
  EXPECT_EQ(config.Validate().message(),
            "eviction.s3fifo_small_fraction: must be in (0, 1) (got 1.5)");
  EXPECT_FALSE(MakeEvictionPolicy(config).ok());
}

TEST(EvictionConfigTest, FactoryBuildsEveryNamedPolicy) {
  EXPECT_EQ(EvictionPolicyNames(), "lru, fifo, sieve, s3fifo, arc");
  for (const auto& name : kAllPolicies) EXPECT_EQ(Make(name, 16)->Name(), name);
}

// ---- Randomized consistency ------------------------------------------------------------------

// 100k random inserts, hits, erases and evictions with random rejections, against a shadow set.
void CheckRandomOps(const std::string& name, uint32_t seed) {
  constexpr BlockId kIds = 300;
  constexpr size_t kCapacity = 64;
  auto policy = Make(name, kCapacity);
  std::mt19937 rng(seed);
  std::vector<bool> resident(kIds, false);
  std::vector<BlockId> resident_ids;  // unordered, for picking
  size_t count = 0;
  auto drop = [&](BlockId id) {
    resident[id] = false;
    --count;
  };
  for (int op = 0; op < 100000; ++op) {
    const uint32_t r = rng() % 100;
    const BlockId id = rng() % kIds;
    if (r < 60) {
      if (resident[id]) {
        policy->Touch(id);
      } else {
        policy->Insert(id, rng() % 600);  // ghost keys collide with old ones: ghost hits happen
        resident[id] = true;
        ++count;
      }
    } else if (r < 70) {
      if (resident[id]) {
        policy->Erase(id);
        drop(id);
      }
    } else {
      const uint32_t salt = rng();
      auto accept = [&](BlockId b) { return ((b * 2654435761u) ^ salt) % 4 != 0 || r < 80; };
      bool any_acceptable = false;
      for (BlockId b = 0; b < kIds; ++b) any_acceptable |= resident[b] && accept(b);
      std::optional<BlockId> victim = policy->Evict(accept);
      ASSERT_EQ(victim.has_value(), any_acceptable) << "op " << op;
      if (victim) {
        ASSERT_LT(*victim, kIds);
        ASSERT_TRUE(resident[*victim]) << "op " << op;
        ASSERT_TRUE(accept(*victim)) << "op " << op;
        drop(*victim);
      }
    }
    ASSERT_EQ(policy->Size(), count) << "op " << op;
  }
}

TEST(EvictionPolicyTest, RandomOpsMatchShadowSet) {
  for (const auto& name : kAllPolicies) {
    SCOPED_TRACE(name);
    CheckRandomOps(name, 1);
    CheckRandomOps(name, 2);
  }
}

}  // namespace
}  // namespace kvtier
