// Client::LookupMany: pipelined lookups (kvtier_client.h).
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

// The pipelined part of LookupMany: every sequence that fits one slot of the window is looked up,
// its result in out[i]; the others (more keys than max_batch or than an arena part holds) are
// left to the caller, listed in `alone`.
absl::Status LookupPipelined(Client::Impl& impl,
                             absl::Span<const absl::Span<const BlockKey>> sequences,
                             std::vector<LookupResult>& out, std::vector<size_t>& alone)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
  // A sliding window: request n uses arena part n % window, which the request submitted window
  // requests earlier has released (it is finished before n is submitted).
  const uint32_t window = WindowOf(impl.region->layout());
  const uint32_t part_bytes = impl.region->arena().bytes / window / 8 * 8;
  struct InFlight {
    size_t index;
    protocol::Request sent;
  };
  std::vector<InFlight> flight(window);
  uint64_t submitted = 0, finished = 0;
  std::vector<uint8_t> tiers;
  auto finish_oldest = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) -> absl::Status {
    const InFlight& f = flight[finished++ % window];
    KVTIER_ASSIGN_OR_RETURN(protocol::Completion done, impl.Finish(f.sent));
    KVTIER_RETURN_IF_ERROR(protocol::ReadLookupResult(impl.region->arena(), f.sent, done, &tiers));
    out[f.index].hit_blocks = done.count;
    out[f.index].tiers.assign(tiers.begin(), tiers.begin() + done.count);
    return absl::OkStatus();
  };
  auto submit_all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) -> absl::Status {
    for (size_t i = 0; i < sequences.size(); ++i) {
      const absl::Span<const BlockKey> keys = sequences[i];
      if (keys.empty()) continue;
      const Client::Impl::Call call = Client::Impl::KeysArgs(Op::kLookup, keys);
      if (keys.size() > impl.welcome.max_batch || Client::Impl::ArenaBytes(call) > part_bytes) {
        alone.push_back(i);
        continue;
      }
      if (submitted - finished == window) KVTIER_RETURN_IF_ERROR(finish_oldest());
      InFlight& f = flight[submitted % window];
      f.index = i;
      // Part n % window of the arena: (n % window) * part_bytes < window * part_bytes <= the
      // arena's bytes, a uint32_t.
      KVTIER_RETURN_IF_ERROR(
          impl.Submit(call, static_cast<uint32_t>(submitted % window) * part_bytes, &f.sent));
      ++submitted;
    }
    while (finished < submitted) KVTIER_RETURN_IF_ERROR(finish_oldest());
    return absl::OkStatus();
  };
  if (absl::Status s = submit_all(); !s.ok()) {
    // Await the answers still owed, so that the next call reads its own completion and no late
    // result lands in the arena under it. Stops at the first that does not come (a daemon gone or
    // a timeout: then the connection is unusable whatever is done here).
    while (finished < submitted && impl.Finish(flight[finished++ % window].sent).ok()) {
    }
    return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<LookupResult>> Client::LookupMany(
    absl::Span<const absl::Span<const BlockKey>> sequences) {
  std::vector<LookupResult> out(sequences.size());
  std::vector<size_t> alone;  // too many keys for a pipeline slot: looked up one by one after
  {
    absl::MutexLock lock(&impl_->mu);
    KVTIER_RETURN_IF_ERROR(LookupPipelined(*impl_, sequences, out, alone));
  }
  for (size_t i : alone) {
    KVTIER_ASSIGN_OR_RETURN(out[i], Lookup(sequences[i]));
  }
  return out;
}

}  // namespace kvtier::client
