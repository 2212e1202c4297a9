// Differential test of the simulator against straightforward reference implementations of the
// replay contract, written here from the contract's words and nothing else: an LRU of std::list +
// std::unordered_map, and an O(n^2) Belady with bypass that scans the future for every resident.
// Many random prefix-chained traces, random capacities; block and prefix hits must be identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <random>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "tests/tools/replay_test_util.h"
#include "tools/replay/simulator.h"

namespace kvtier::replay {
namespace {

using Requests = std::vector<std::vector<uint64_t>>;

struct Hits {
  uint64_t block = 0, prefix = 0;
  bool operator==(const Hits&) const = default;
};

// Counts one request's hits given a presence test.
template <typename Present>
void CountHits(const std::vector<uint64_t>& request, Present present, Hits* hits) {
  bool prefix = true;
  for (uint64_t id : request) {
    const bool p = present(id);
    hits->block += p;
    prefix = prefix && p;
    hits->prefix += prefix;
  }
}

Hits ReferenceLru(const Requests& requests, size_t capacity) {
  std::list<uint64_t> order;  // front = most recent
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  Hits hits;
  for (const auto& request : requests) {
    CountHits(
        request, [&](uint64_t id) { return where.count(id) != 0; }, &hits);
    for (auto it = request.rbegin(); it != request.rend(); ++it) {
      if (auto found = where.find(*it); found != where.end()) order.erase(found->second);
      order.push_front(*it);
      where[*it] = order.begin();
      if (order.size() > capacity) {
        where.erase(order.back());
        order.pop_back();
      }
    }
  }
  return hits;
}

// Belady with bypass by brute force. A resident block's priority is (next request after the one
// that last referenced it, its position there, its id); the largest among residents and the
// newcomer leaves.
Hits ReferenceBelady(const Requests& requests, size_t capacity) {
  constexpr uint64_t kNever = UINT64_MAX;
  auto next_use = [&](uint64_t id, size_t after) -> uint64_t {
    for (size_t r = after + 1; r < requests.size(); ++r) {
      if (std::count(requests[r].begin(), requests[r].end(), id) != 0) return r;
    }
    return kNever;
  };
  struct State {
    size_t last_request;
    uint64_t depth;
  };
  std::unordered_map<uint64_t, State> resident;
  Hits hits;
  for (size_t r = 0; r < requests.size(); ++r) {
    CountHits(
        requests[r], [&](uint64_t id) { return resident.count(id) != 0; }, &hits);
    for (size_t pos = requests[r].size(); pos-- > 0;) {
      const uint64_t id = requests[r][pos];
      resident[id] = State{r, pos};
      if (resident.size() <= capacity) continue;
      auto victim = resident.end();
      std::tuple<uint64_t, uint64_t, uint64_t> worst{0, 0, 0};
      for (auto it = resident.begin(); it != resident.end(); ++it) {
        const std::tuple<uint64_t, uint64_t, uint64_t> key{
            next_use(it->first, it->second.last_request), it->second.depth, it->first};
        if (victim == resident.end() || key > worst) std::tie(victim, worst) = std::tie(it, key);
      }
      resident.erase(victim);
    }
  }
  return hits;
}

Hits Simulated(const Requests& requests, const std::string& policy, size_t capacity) {
  // The simulator breaks Belady's last ties by dense id (first-seen order); the OPT tests feed
  // the reference already-dense ids (Dense()) so both name blocks alike.
  const Trace trace = testing::MakeTrace(requests);
  TierConfig tier;
  tier.capacity_blocks = capacity;
  tier.eviction.policy = policy;
  absl::StatusOr<SimResult> result = Simulate(trace, {tier}, SimOptions{});
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? Hits{result->block_hits, result->prefix_hits} : Hits{};
}

// The requests with hash ids renamed 0, 1, 2, ... in first-seen order, as the trace loader does.
Requests Dense(const Requests& requests) {
  std::unordered_map<uint64_t, uint64_t> ids;
  Requests out = requests;
  for (auto& request : out) {
    for (uint64_t& id : request) id = ids.emplace(id, ids.size()).first->second;
  }
  return out;
}

TEST(ReplayDifferentialTest, LruMatchesTheListAndMapReference) {
  std::mt19937_64 rng(20240601);
  for (int round = 0; round < 300; ++round) {
    const Requests requests = testing::RandomChainedRequests(rng, 60, 10, 3);
    const size_t capacity = std::uniform_int_distribution<size_t>(1, 40)(rng);
    ASSERT_EQ(Simulated(requests, "lru", capacity), ReferenceLru(requests, capacity))
        << "round " << round << ", capacity " << capacity;
  }
}

TEST(ReplayDifferentialTest, OptMatchesBruteForceBeladyWithBypass) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    const Requests requests = Dense(testing::RandomChainedRequests(rng, 50, 8, 3));
    const size_t capacity = std::uniform_int_distribution<size_t>(1, 30)(rng);
    ASSERT_EQ(Simulated(requests, "opt", capacity), ReferenceBelady(requests, capacity))
        << "round " << round << ", capacity " << capacity;
  }
}

TEST(ReplayDifferentialTest, OptWithEnoughCapacityIsTheInfiniteCache) {
  std::mt19937_64 rng(99);
  const Requests requests = Dense(testing::RandomChainedRequests(rng, 200, 12, 4));
  EXPECT_EQ(Simulated(requests, "opt", 100000), ReferenceLru(requests, 100000));
}

}  // namespace
}  // namespace kvtier::replay
