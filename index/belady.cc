#include "index/belady.h"

#include <algorithm>
#include <cassert>
#include <tuple>

namespace kvtier {

std::vector<uint32_t> NextUseByRequest(absl::Span<const uint32_t> refs,
                                       absl::Span<const uint64_t> request_begin, size_t num_ids) {
  std::vector<uint32_t> next(refs.size(), BeladyCache::kNever);
  std::vector<uint32_t> seen_at(num_ids, BeladyCache::kNever);  // earliest later request so far
  const size_t requests = request_begin.empty() ? 0 : request_begin.size() - 1;
  for (size_t r = requests; r-- > 0;) {
    const uint64_t begin = request_begin[r], end = request_begin[r + 1];
    // Read every id before writing any, so duplicates inside the request see the later request.
    for (uint64_t i = begin; i < end; ++i) next[i] = seen_at[refs[i]];
    for (uint64_t i = begin; i < end; ++i) seen_at[refs[i]] = static_cast<uint32_t>(r);
  }
  return next;
}

BeladyCache::BeladyCache(size_t capacity_blocks, size_t num_ids)
    : capacity_(capacity_blocks), resident_(num_ids, 0), next_use_(num_ids, 0), depth_(num_ids, 0) {
  assert(capacity_blocks > 0);
  heap_.reserve(std::min<size_t>(capacity_blocks * 2 + 16, num_ids * 2 + 16));
}

bool BeladyCache::Before(const Entry& a, const Entry& b) {
  return std::tie(a.next_use, a.depth, a.id) < std::tie(b.next_use, b.depth, b.id);
}

bool BeladyCache::IsLive(const Entry& e) const {
  return resident_[e.id] != 0 && next_use_[e.id] == e.next_use && depth_[e.id] == e.depth;
}

void BeladyCache::Push(const Entry& e) {
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), Before);
}

const BeladyCache::Entry& BeladyCache::Top() {
  while (!IsLive(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), Before);
    heap_.pop_back();
  }
  return heap_.front();
}

void BeladyCache::CompactIfStale() {
  // Every touch leaves one stale entry behind; rebuild once they outnumber the live ones, so the
  // heap stays O(capacity) and the rebuild is amortised O(1) per reference.
  if (heap_.size() < 2 * size_ + 1024) return;
  std::erase_if(heap_, [this](const Entry& e) { return !IsLive(e); });
  std::make_heap(heap_.begin(), heap_.end(), Before);
}

BeladyCache::Result BeladyCache::Reference(BlockId id, uint32_t next_use, uint32_t depth) {
  const Entry entry{next_use, depth, id};
  if (resident_[id] != 0) {
    if (next_use_[id] != next_use || depth_[id] != depth) {
      next_use_[id] = next_use;
      depth_[id] = depth;
      Push(entry);
      CompactIfStale();
    }
    return {Outcome::kTouched, std::nullopt};
  }
  if (size_ >= capacity_) {
    const Entry& top = Top();
    if (!Before(entry, top)) return {Outcome::kBypassed, std::nullopt};
    const BlockId victim = top.id;
    std::pop_heap(heap_.begin(), heap_.end(), Before);
    heap_.pop_back();
    resident_[victim] = 0;
    --size_;
    resident_[id] = 1;
    next_use_[id] = next_use;
    depth_[id] = depth;
    ++size_;
    Push(entry);
    return {Outcome::kInserted, victim};
  }
  resident_[id] = 1;
  next_use_[id] = next_use;
  depth_[id] = depth;
  ++size_;
  Push(entry);
  return {Outcome::kInserted, std::nullopt};
}

}  // namespace kvtier
