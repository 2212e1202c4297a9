// LRU over an intrusive list: front = least recently used. Every operation is O(1) and touches two
// or three array entries, which is what lets `kvtier replay` reach tens of millions of references
// per second.
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
        return id;
      }
    }
    return std::nullopt;
  }

  size_t Size() const override { return order_.size(); }
  std::string_view Name() const override { return "lru"; }

 private:
  ListLinks links_;
  IntrusiveList order_;  // least recently used first
};

}  // namespace

std::unique_ptr<EvictionPolicy> NewLruPolicy() { return std::make_unique<LruPolicy>(); }

}  // namespace kvtier
