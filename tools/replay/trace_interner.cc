#include "tools/replay/trace_interner.h"

#include <algorithm>

#include "common/huge_pages.h"

namespace kvtier::replay {
namespace {

// The array starts at this many entries (256 KiB) and covers a hash id only while it stays within
// twice the distinct ids seen plus this slack: dense numberings fit, hashes spread over 64 bits
// never do, and the array never holds more than a few entries per distinct id.
constexpr uint64_t kMinDirect = uint64_t{1} << 16;
constexpr uint64_t kMaxInitialDirect = uint64_t{1} << 20;

}  // namespace

// The array starts at the expected size (capped: a trace of sparse hashes wastes at most 4 MiB), so
// a dense trace rarely pays for growing it.
TraceInterner::TraceInterner(size_t expected_ids)
    : direct_(std::clamp<uint64_t>(expected_ids, kMinDirect, kMaxInitialDirect), kUnseen),
      expected_ids_(expected_ids) {}

uint32_t TraceInterner::InternSlow(uint64_t hash, std::vector<uint64_t>* hashes) {
  if (hash <= 2 * hashes->size() + kMinDirect) {
    GrowDirect(std::max<uint64_t>({2 * direct_.size(), hash + 1, expected_ids_}));
    return Intern(hash, hashes);
  }
  if (map_.empty()) map_.reserve(expected_ids_);
  auto [it, inserted] = map_.try_emplace(hash, static_cast<uint32_t>(hashes->size()));
  if (inserted) hashes->push_back(hash);
  return it->second;
}

void TraceInterner::GrowDirect(uint64_t size) {
  ReserveHuge(direct_, size);  // looked up at random: huge pages spare TLB misses
  direct_.resize(size, kUnseen);
  for (auto it = map_.begin(); it != map_.end();) {
    if (it->first < size) {
      direct_[it->first] = it->second;
      map_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace kvtier::replay
