// RequestDispatcher: one client's decoded ring requests (client/protocol/record_codec.h) turned
// into Service calls, and their results written back into the client's arena as the protocol
// says (docs/protocol.md "Ops").
//
// Arguments are copied out of the shared arena and validated by the codec before use; results
// are written only into the request's own result range. A malformed request is an error for the
// caller to close the client with; per-block outcomes (missing, retry, ...) are normal results.
//
// Thread-safety: Dispatch is called by the client's worker thread only. A Get's `async_done` runs
// on whatever thread completes its last block (see Service::Get).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "client/protocol/record_codec.h"
#include "daemon/service.h"

namespace kvtier {

class RequestDispatcher {
 public:
  using AsyncDone = std::function<void(const protocol::Completion&)>;

  RequestDispatcher(Service& service, std::shared_ptr<Session> session, protocol::ArenaView arena);

  // The completion of `request`, or nullopt when it completes later through `async_done` (get).
  // InvalidArgument, naming the request, for arguments that do not decode.
  absl::StatusOr<std::optional<protocol::Completion>> Dispatch(const protocol::Request& request,
                                                               AsyncDone async_done);

 private:
  absl::StatusOr<protocol::Completion> Lookup(const protocol::Request& request);
  absl::Status Get(const protocol::Request& request, AsyncDone async_done);
  absl::StatusOr<protocol::Completion> PutBegin(const protocol::Request& request);
  absl::StatusOr<protocol::Completion> PutCommit(const protocol::Request& request);
  absl::StatusOr<protocol::Completion> KeysOp(const protocol::Request& request);
  // Working slots (protocol v3): work_take, work_publish, work_free.
  absl::StatusOr<protocol::Completion> WorkOp(const protocol::Request& request);
  // The tier a put_begin or work op names: T1, or T0 when the daemon runs one; else an error
  // naming the request.
  absl::StatusOr<Tier> WritableTier(const protocol::Request& request) const;
  protocol::Completion Stats(const protocol::Request& request);

  Service& service_;
  const std::shared_ptr<Session> session_;
  const protocol::ArenaView arena_;
  // Scratch reused across requests (one worker thread per dispatcher).
  std::vector<BlockKey> keys_;
  std::vector<TierMask> tiers_;
  std::vector<protocol::BlockResult> results_;
  std::vector<protocol::WorkPublishItem> publish_;
  std::vector<uint32_t> slots_;
};

}  // namespace kvtier
