// LRU over an intrusive list: front = least recently used. Every operation is O(1) and touches two
// or three array entries, which is what lets `kvtier replay` reach tens of millions of references
// per second.
//
// With millions of blocks those entries are cold, evictions most of all: the front was last
// touched long ago, and the list is a chain of dependent reads. A small window of the ids next to
// the front, filled ahead of time with prefetches, hides that latency (the victim window below).
#include <algorithm>
#include <array>
#include <cassert>

#include "index/intrusive_list.h"
#include "index/policies_internal.h"

namespace kvtier {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  LruPolicy() : order_(&links_) {}

  void Insert(BlockId id, uint64_t /*ghost_key*/) override {
    links_.EnsureId(id);
    assert(!order_.Contains(id));
    order_.PushBack(id);
  }

  void Touch(BlockId id) override {
    assert(order_.Contains(id));
    order_.MoveToBack(id);
  }

  void Erase(BlockId id) override {
    assert(order_.Contains(id));
    order_.Remove(id);
  }

  // Walks from the least recent end; rejected blocks are passed over and stay where they are.
  std::optional<BlockId> Evict(absl::FunctionRef<bool(BlockId)> can_evict) override {
    for (uint32_t id = order_.front(); id != kNoId; id = order_.Next(id)) {
      if (can_evict(id)) {
        order_.Remove(id);
        OnEvicted(id);
        return id;
      }
    }
    return std::nullopt;
  }

  // The front, with no predicate to ask.
  std::optional<BlockId> EvictAny() override {
    const uint32_t id = order_.front();
    if (id == kNoId) return std::nullopt;
    order_.Remove(id);
    OnEvicted(id);
    return id;
  }

  // Touch reads the links of the id and of its two neighbours, Insert those of the id (the back's
  // are hot). The neighbours are unknown until the id's links arrive, and are mostly the id's
  // neighbours in the same request anyway (a request is touched as a run), so only ids are loaded.
  void Prefetch(absl::Span<const BlockId> ids) const override {
    if (!order_.Addressable(kWindowMinIds)) return;  // small: cached anyway
    for (BlockId id : ids) {
      if (order_.Addressable(id)) order_.Prefetch(id);
    }
  }

  BlockId UpcomingVictim() const override {
    if (window_size_ == 0) return kNoVictimHint;
    return window_[(window_head_ + std::min(kHintDistance, window_size_ - 1)) % kWindow];
  }

  size_t Size() const override { return order_.size(); }
  std::string_view Name() const override { return "lru"; }

 private:
  // The victim window: the ids next to the front of the list, in list order, ahead of the
  // evictions. Each eviction extends it by the ids whose links share a cache line with the last
  // one (free) plus one id on a new line, whose links it prefetches and reads only kLineDelay
  // evictions later; so the dependent reads along the list overlap with the work between
  // evictions instead of stalling them. Synthetic traces with millions of blocks cross to a new
  // line about every fourth id, so the window easily stays ahead. It is a hint only: an id
  // touched or erased while in the window is skipped when the front reaches it, and a window that
  // disagrees with the front is restarted; victims never depend on it.
  static constexpr uint32_t kWindow = 64;        // ids; a power of two
  static constexpr uint32_t kHintDistance = 16;  // UpcomingVictim: this many evictions ahead
  static constexpr uint64_t kLineDelay = 2;      // evictions between prefetching and reading
  // Below this many ids the links (8 bytes each) stay in the L2/L3 caches, and the window would
  // only cost instructions.
  static constexpr uint32_t kWindowMinIds = 1u << 20;

  void OnEvicted(uint32_t victim) {
    if (!order_.Addressable(kWindowMinIds)) return;
    ++evictions_;
    while (window_size_ != 0 && window_[window_head_] != victim) PopWindow();
    if (window_size_ != 0) PopWindow();
    ExtendWindow();
  }

  void PopWindow() {
    window_head_ = (window_head_ + 1) % kWindow;
    --window_size_;
  }

  void ExtendWindow() {
    if (window_size_ == 0) {
      if (order_.empty()) return;
      window_[window_head_] = order_.front();  // its links were just written: no prefetch
      window_size_ = 1;
      readable_at_ = evictions_;
    }
    if (evictions_ < readable_at_) return;
    uint32_t last = window_[(window_head_ + window_size_ - 1) % kWindow];
    while (window_size_ < kWindow) {
      const uint32_t next = order_.Next(last);
      if (next == kNoId) return;
      window_[(window_head_ + window_size_++) % kWindow] = next;
      if (!order_.SameCacheLine(next, last)) {
        order_.Prefetch(next);
        readable_at_ = evictions_ + kLineDelay;
        return;
      }
      last = next;
    }
  }

  ListLinks links_;
  IntrusiveList order_;  // least recently used first
  std::array<uint32_t, kWindow> window_{};
  uint32_t window_head_ = 0;
  uint32_t window_size_ = 0;
  uint64_t evictions_ = 0;
  uint64_t readable_at_ = 0;  // evictions_ from which the window's last id's links may be read
};

}  // namespace

std::unique_ptr<EvictionPolicy> NewLruPolicy() { return std::make_unique<LruPolicy>(); }

}  // namespace kvtier
