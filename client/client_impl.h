// Internal to the C++ client (kvtier_client.h): the connection and the request/response call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/kvtier_client.h"
#include "client/protocol/event_fd.h"
#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "client/protocol/shm_region.h"
#include "client/protocol/spsc_ring.h"
#include "client/protocol/unique_fd.h"

namespace kvtier::client {

class Client::Impl {
 public:
  // What a request carries besides its arguments.
  struct Call {
    protocol::Op op = protocol::Op::kNop;
    size_t count = 0;  // keys or items; Submit refuses more than welcome.max_batch
    uint8_t tier = 0;
    // Writes the arguments into the arena at the range given.
    std::function<void(protocol::ArenaView, protocol::ArenaRange)> write_args;
  };

  // A request whose arguments are `keys` (lookup, get, release, drop); `keys` must outlive the
  // Submit/Do that writes them.
  static Call KeysArgs(protocol::Op op, absl::Span<const BlockKey> keys, uint8_t tier = 0) {
    return Call{op, keys.size(), tier, [keys](protocol::ArenaView a, protocol::ArenaRange r) {
                  protocol::WriteKeys(a, r, keys);
                }};
  }

  static absl::StatusOr<std::unique_ptr<Impl>> Connect(const ClientOptions& options);
  ~Impl();

  // Sends one request and waits for its completion; on OK the request is returned in `*sent`
  // (for the result readers). The caller holds `mu` until it has read the results out of the
  // arena, which the next request reuses.
  absl::StatusOr<protocol::Completion> Do(const Call& call, protocol::Request* sent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Do of a request answered with a BlockResult per item, read out and checked (slots against
  // the tier the request names: limits()).
  absl::StatusOr<std::vector<protocol::BlockResult>> DoBlockResults(const Call& call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The session's slot counts and sizes per tier, from the Welcome.
  protocol::SessionLimits limits() const;
  // Do in two halves, so that several requests can be in flight (a put commits each block while
  // it copies the next): Submit sends the request with its arguments and results at
  // `arena_offset` (8-aligned) and returns it in `*sent`; Finish waits for its completion.
  // Requests complete in the order they were submitted, so they must be finished in that order,
  // and the arena ranges of requests in flight must not overlap (ArenaBytes says how much each
  // takes). mu is held from Submit to the reading of the last result. Submit refuses
  // (InvalidArgument, nothing sent, the connection stays usable) what the daemon would take for a
  // malformed request and close the connection over: a count of 0 for an op with keys, above
  // welcome.max_batch, or arguments and results that do not fit the arena from `arena_offset`.
  absl::Status Submit(const Call& call, uint32_t arena_offset, protocol::Request* sent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::StatusOr<protocol::Completion> Finish(const protocol::Request& sent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Arena bytes the request takes (8-aligned arguments and results); kNeverFits, more than any
  // arena holds, for a count above kMaxBatchKeys (which Submit refuses anyway).
  static constexpr uint32_t kNeverFits = UINT32_MAX;
  static uint32_t ArenaBytes(const Call& call);

  // One request (and the reading of its results) at a time. Not reentrant: a public Client
  // method takes it once and calls only helpers that require it.
  absl::Mutex mu;
  // Set by Connect, then constant.
  const ClientOptions options;
  const BlockKey root;
  protocol::Welcome welcome;
  protocol::UniqueFd socket;
  std::byte* t1 = nullptr;  // mapping of the T1 segment, welcome.t1_bytes bytes
  std::unique_ptr<protocol::EventFd> daemon_bell, client_bell;
  // The region's arena and rings hold the request in flight: used under mu only.
  std::unique_ptr<protocol::ShmRegion> region ABSL_PT_GUARDED_BY(mu);
  std::unique_ptr<protocol::RingProducer> requests ABSL_PT_GUARDED_BY(mu);
  std::unique_ptr<protocol::RingConsumer> completions ABSL_PT_GUARDED_BY(mu);
  uint64_t next_request_id ABSL_GUARDED_BY(mu) = 1;

 private:
  Impl(const ClientOptions& o, const BlockKey& r) : options(o), root(r) {}
  absl::Status Handshake(protocol::Deadline deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status MapTier(protocol::UniqueFd fd);
  absl::StatusOr<protocol::Completion> Await(uint64_t request_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status WhyGone();
};

}  // namespace kvtier::client
