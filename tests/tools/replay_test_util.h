// Helpers for the replay tests: small traces built in memory, and random prefix-chained ones.
#pragma once

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "tools/replay/trace.h"

namespace kvtier::replay::testing {

// A trace whose request r references `requests[r]` (hash ids, interned in first-seen order). Each
// request's prompt is its blocks x block_tokens tokens.
inline Trace MakeTrace(const std::vector<std::vector<uint64_t>>& requests,
                       uint32_t block_tokens = 16) {
  Trace trace;
  trace.block_tokens = block_tokens;
  std::unordered_map<uint64_t, uint32_t> ids;
  for (const std::vector<uint64_t>& request : requests) {
    for (uint64_t hash : request) {
      auto [it, fresh] = ids.emplace(hash, static_cast<uint32_t>(trace.hash_ids.size()));
      if (fresh) trace.hash_ids.push_back(hash);
      trace.refs.push_back(it->second);
    }
    trace.request_begin.push_back(trace.refs.size());
    trace.input_tokens.push_back(static_cast<uint32_t>(request.size() * block_tokens));
    trace.timestamp_ms.push_back(double(trace.timestamp_ms.size()));
  }
  return trace;
}

// Random prefix-chained requests: each request walks down a random trie from the root, mostly
// following existing children (shared prefixes, earlier turns) and sometimes growing new ones, so
// equal ids always mean an equal prefix. `universe` bounds the branching to keep hits frequent.
inline std::vector<std::vector<uint64_t>> RandomChainedRequests(std::mt19937_64& rng, int requests,
                                                                int max_depth, int fanout) {
  std::vector<std::vector<uint64_t>> children(1);  // node 0 = root; node ids are the hash ids + 1
  std::vector<std::vector<uint64_t>> out;
  for (int r = 0; r < requests; ++r) {
    const int depth = std::uniform_int_distribution<int>(1, max_depth)(rng);
    uint64_t node = 0;
    std::vector<uint64_t> request;
    for (int d = 0; d < depth; ++d) {
      std::vector<uint64_t>& kids = children[node];
      const bool grow = kids.empty() || (int(kids.size()) < fanout &&
                                         std::uniform_int_distribution<int>(0, 3)(rng) == 0);
      if (grow) {
        kids.push_back(children.size());
        children.emplace_back();
      }
      node =
          children[node][std::uniform_int_distribution<size_t>(0, children[node].size() - 1)(rng)];
      request.push_back(node - 1 + 1000);  // hash ids need not be dense
    }
    out.push_back(std::move(request));
  }
  return out;
}

}  // namespace kvtier::replay::testing
