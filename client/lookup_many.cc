// Client::LookupMany: pipelined lookups (kvtier_client.h).
#include <fmt/format.h>

#include <algorithm>

#include "client/client_impl.h"
#include "client/kvtier_client.h"

namespace kvtier::client {
namespace {

using protocol::Op;

// Requests in flight at most: the daemon takes no more requests than its completion ring can
// answer, so more than cq_entries unanswered ones would stall both sides.
uint32_t WindowOf(const protocol::RegionLayout& layout) {
  return std::max<uint32_t>(1, std::min(layout.sq_entries, layout.cq_entries));
}

Client::Impl::Call LookupCall(absl::Span<const BlockKey> keys) {
  return Client::Impl::Call{
      Op::kLookup, static_cast<uint32_t>(keys.size()), 0,
      [keys](protocol::ArenaView a, protocol::ArenaRange r) { protocol::WriteKeys(a, r, keys); }};
}

}  // namespace

absl::StatusOr<std::vector<LookupResult>> Client::LookupMany(
    absl::Span<const absl::Span<const BlockKey>> sequences) {
  std::vector<LookupResult> out(sequences.size());
  std::vector<size_t> long_ones;  // more keys than one request carries: looked up alone
  auto lock = impl_->Lock();
  const uint32_t window = WindowOf(impl_->region->layout());
  const uint32_t arena = impl_->region->arena().bytes;
  struct InFlight {
    size_t index;
    protocol::Request sent;
  };
  std::vector<InFlight> flight;
  flight.reserve(window);
  std::vector<uint8_t> tiers;
  size_t next = 0;
  while (next < sequences.size()) {
    uint32_t offset = 0;  // each window fills the arena from its start
    flight.clear();
    for (; next < sequences.size() && flight.size() < window; ++next) {
      const absl::Span<const BlockKey> keys = sequences[next];
      if (keys.empty()) continue;
      const Impl::Call call = LookupCall(keys);
      const uint32_t bytes = Impl::ArenaBytes(call);
      if (keys.size() > impl_->welcome.max_batch || bytes > arena) {
        long_ones.push_back(next);
        continue;
      }
      if (uint64_t{offset} + bytes > arena) break;  // the arena is full: this one opens the next
      flight.push_back({next, {}});
      KVTIER_RETURN_IF_ERROR(impl_->Submit(call, offset, &flight.back().sent));
      offset += bytes;
    }
    for (const InFlight& f : flight) {
      KVTIER_ASSIGN_OR_RETURN(protocol::Completion done, impl_->Finish(f.sent));
      KVTIER_RETURN_IF_ERROR(
          protocol::ReadLookupResult(impl_->region->arena(), f.sent, done, &tiers));
      out[f.index].hit_blocks = done.count;
      out[f.index].tiers.assign(tiers.begin(), tiers.begin() + done.count);
    }
  }
  lock.unlock();
  for (size_t i : long_ones) {
    KVTIER_ASSIGN_OR_RETURN(out[i], Lookup(sequences[i]));
  }
  return out;
}

}  // namespace kvtier::client
