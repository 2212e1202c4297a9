// FIFO over an intrusive list: front = oldest insertion. A hit changes nothing.
#include <cassert>

#include "index/intrusive_list.h"
#include "index/policies_internal.h"

namespace kvtier {
namespace {

class FifoPolicy final : public EvictionPolicy {
 public:
  FifoPolicy() : order_(&links_) {}

  void Insert(BlockId id, uint64_t /*ghost_key*/) override {
    links_.EnsureId(id);
    assert(!order_.Contains(id));
    order_.PushBack(id);
  }

  void Touch(BlockId id) override { assert(order_.Contains(id)); }

  void Erase(BlockId id) override {
    assert(order_.Contains(id));
    order_.Remove(id);
  }

  // Walks from the oldest insertion; rejected blocks are passed over and stay where they are.
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
  std::string_view Name() const override { return "fifo"; }

 private:
  ListLinks links_;
  IntrusiveList order_;  // oldest insertion first
};

}  // namespace

std::unique_ptr<EvictionPolicy> NewFifoPolicy() { return std::make_unique<FifoPolicy>(); }

}  // namespace kvtier
