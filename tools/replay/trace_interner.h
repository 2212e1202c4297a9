// Interning of a trace's hash ids into dense block ids 0, 1, 2, ... in first-seen order.
//
// The hot path of trace loading runs once per block reference. Published traces (Mooncake, Bailian)
// already number their blocks densely from 0, and a hash table probe per reference then costs more
// than parsing the JSON. So small hash ids -- those below about twice the number of distinct ids
// seen
// -- are looked up in a flat array indexed by the hash id, and only the others (real 64-bit hashes,
// sparse numberings) go to an absl::flat_hash_map. Which side a hash lives on never changes what id
// it gets: when the array grows, map entries it now covers move into it.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtier::replay {

class TraceInterner {
 public:
  // `expected_ids`: a guess of the number of distinct ids, for reserving; 0 if unknown.
  explicit TraceInterner(size_t expected_ids);

  // Returns the dense id of `hash`. A hash not seen before gets the next id, size(), and is
  // appended to *hashes (so (*hashes)[id] == hash). At most 2^32 - 1 distinct ids (the caller
  // checks).
  uint32_t Intern(uint64_t hash, std::vector<uint64_t>* hashes) {
    if (hash < direct_.size()) {
      uint32_t& slot = direct_[hash];
      if (slot == kUnseen) {
        slot = static_cast<uint32_t>(hashes->size());
        hashes->push_back(hash);
      }
      return slot;
    }
    return InternSlow(hash, hashes);
  }

  // A hint, no observable effect: `hash` is about to be interned. With millions of distinct ids
  // the flat array is tens of MB and each lookup a cache miss; prefetching a line's ids before
  // interning them overlaps those misses.
  void Prefetch(uint64_t hash) const {
    if (hash < direct_.size()) __builtin_prefetch(direct_.data() + hash);
  }

 private:
  static constexpr uint32_t kUnseen = ~uint32_t{0};

  uint32_t InternSlow(uint64_t hash, std::vector<uint64_t>* hashes);
  // Makes the array cover [0, size), moving the map entries it now covers.
  void GrowDirect(uint64_t size);

  std::vector<uint32_t> direct_;  // by hash id: dense id, or kUnseen
  absl::flat_hash_map<uint64_t, uint32_t> map_;
  size_t expected_ids_;
};

}  // namespace kvtier::replay
