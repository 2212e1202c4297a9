// Helpers of the remote tier's tests over RemoteStore: store options for a test server, keys, and
// batched puts and gets whose payloads are the key's pattern (redis_test_util.h), so every hit is
// checked byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/tiers/remote/redis_test_util.h"
#include "tiers/remote/remote_store.h"

namespace kvtier::testing {

inline constexpr uint64_t kTestNamespace = 0x5eed;

// Timeouts generous enough for ASan on 2 busy cores; a small breaker threshold and wait.
inline RemoteStoreOptions TestStoreOptions(std::vector<std::string> nodes) {
  RemoteStoreOptions o;
  o.nodes = std::move(nodes);
  o.connect_timeout_ms = 2000;
  o.command_timeout_ms = 10000;
  o.reconnect_backoff_min_ms = 20;
  o.reconnect_backoff_max_ms = 500;
  o.breaker_failures = 3;
  o.breaker_open_ms = 50;
  o.breaker_open_max_ms = 500;
  return o;
}

inline std::vector<BlockKey> TestKeys(size_t n, uint64_t salt) {
  std::vector<BlockKey> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = BlockKey{i * 0x9e3779b97f4a7c15ULL + 1, salt};
  return keys;
}

// Puts keys[i] with a payload of `bytes` pattern bytes; `stored` (if given) gets each outcome.
inline absl::Status PutPattern(RemoteStore& store, const std::vector<BlockKey>& keys, size_t bytes,
                               std::vector<RemoteOutcome>* stored = nullptr) {
  std::vector<std::vector<uint8_t>> payloads(keys.size(), std::vector<uint8_t>(bytes));
  std::vector<RemotePutItem> items(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    FillPattern(keys[i], payloads[i].data(), bytes);
    items[i].record = BlockRecord{keys[i], kTestNamespace, static_cast<uint32_t>(bytes), 0};
    items[i].payload = payloads[i].data();
  }
  absl::Status status = store.Put(absl::MakeSpan(items));
  if (stored != nullptr) {
    stored->clear();
    for (const RemotePutItem& item : items) stored->push_back(item.outcome);
  }
  return status;
}

struct GetTally {
  size_t hits = 0, misses = 0, errors = 0;
  size_t wrong = 0;  // hits whose bytes or size were not the key's pattern: must stay 0
  absl::Status status;
};

inline GetTally GetAndCheck(RemoteStore& store, const std::vector<BlockKey>& keys, size_t bytes) {
  std::vector<std::vector<uint8_t>> buffers(keys.size(), std::vector<uint8_t>(bytes + 4096));
  std::vector<RemoteGetItem> items(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    items[i].key = keys[i];
    items[i].namespace_id = kTestNamespace;
    items[i].dst = buffers[i].data();
    items[i].dst_bytes = static_cast<uint32_t>(buffers[i].size());
  }
  GetTally t;
  t.status = store.Get(absl::MakeSpan(items));
  for (size_t i = 0; i < keys.size(); ++i) {
    switch (items[i].outcome) {
      case RemoteOutcome::kHit:
        ++t.hits;
        if (items[i].record.payload_bytes != bytes ||
            !MatchesPattern(keys[i], buffers[i].data(), bytes)) {
          ++t.wrong;
        }
        break;
      case RemoteOutcome::kMiss:
        ++t.misses;
        break;
      case RemoteOutcome::kError:
        ++t.errors;
        break;
    }
  }
  return t;
}

}  // namespace kvtier::testing
