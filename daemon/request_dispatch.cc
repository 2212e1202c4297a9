#include "daemon/request_dispatch.h"

#include <fmt/format.h>

#include <utility>

namespace kvtier {

using protocol::BlockCode;
using protocol::BlockResult;
using protocol::Completion;
using protocol::Op;
using protocol::Request;

namespace {

// The wire's result of a block: the service's code as it is, and the slot with kOk only.
BlockResult ResultOf(BlockCode code, SlotId slot = kNoSlot, uint32_t payload_bytes = 0) {
  const bool has_slot = code == BlockCode::kOk && slot != kNoSlot;
  return BlockResult{static_cast<uint32_t>(code), has_slot ? slot : 0, has_slot ? payload_bytes : 0,
                     0};
}

BlockResult ResultOf(const SlotResult& r) { return ResultOf(r.code, r.slot, r.payload_bytes); }

}  // namespace

RequestDispatcher::RequestDispatcher(Service& service, std::shared_ptr<Session> session,
                                     protocol::ArenaView arena)
    : service_(service), session_(std::move(session)), arena_(arena) {}

absl::StatusOr<std::optional<Completion>> RequestDispatcher::Dispatch(const Request& request,
                                                                      AsyncDone async_done) {
  switch (request.op) {
    case Op::kNop:
      return protocol::EmptyCompletion(request, protocol::RequestStatus::kOk);
    case Op::kLookup:
      return Lookup(request);
    case Op::kGet:
      KVTIER_RETURN_IF_ERROR(Get(request, std::move(async_done)));
      return std::nullopt;
    case Op::kPutBegin:
      return PutBegin(request);
    case Op::kPutCommit:
      return PutCommit(request);
    case Op::kPutAbort:
    case Op::kRelease:
    case Op::kDrop:
      return KeysOp(request);
    case Op::kStats:
      return Stats(request);
    case Op::kWorkTake:
    case Op::kWorkPublish:
    case Op::kWorkFree:
      return WorkOp(request);
  }
  return absl::InvalidArgumentError(
      fmt::format("request {}: unknown op {}", request.request_id, static_cast<int>(request.op)));
}

absl::StatusOr<Completion> RequestDispatcher::Lookup(const Request& request) {
  KVTIER_RETURN_IF_ERROR(protocol::ReadKeys(arena_, request, &keys_));
  tiers_.assign(keys_.size(), 0);
  const size_t n = service_.Lookup(*session_, keys_, absl::MakeSpan(tiers_));
  for (size_t i = n; i < tiers_.size(); ++i) tiers_[i] = 0;  // past the prefix: unspecified
  // n <= keys_.size() == request.count, a uint32_t.
  return protocol::WriteLookupResult(arena_, request, static_cast<uint32_t>(n), tiers_);
}

absl::Status RequestDispatcher::Get(const Request& request, AsyncDone async_done) {
  const bool t0 = request.tier == static_cast<uint8_t>(Tier::kT0) && service_.has_t0();
  if (request.tier != static_cast<uint8_t>(Tier::kT1) && !t0) {
    return absl::InvalidArgumentError(fmt::format(
        "request {} (get): tier {} cannot be read from; this daemon serves gets from {}",
        request.request_id, request.tier,
        service_.has_t0() ? "T0 (0) and T1 (1)" : "T1 (1) (it runs without T0)"));
  }
  KVTIER_RETURN_IF_ERROR(protocol::ReadKeys(arena_, request, &keys_));
  const protocol::ArenaView arena = arena_;
  service_.Get(session_, keys_, t0 ? Tier::kT0 : Tier::kT1,
               [arena, request, done = std::move(async_done)](std::vector<SlotResult> got) {
                 std::vector<BlockResult> results(got.size());
                 for (size_t i = 0; i < got.size(); ++i) results[i] = ResultOf(got[i]);
                 done(protocol::WriteBlockResults(arena, request, results));
               });
  return absl::OkStatus();
}

absl::StatusOr<Completion> RequestDispatcher::PutBegin(const Request& request) {
  KVTIER_ASSIGN_OR_RETURN(const Tier tier, WritableTier(request));
  std::vector<protocol::PutBeginItem> items;
  KVTIER_RETURN_IF_ERROR(protocol::ReadPutBegin(arena_, request, service_.slot_bytes(), &items));
  std::vector<SlotResult> begun = service_.PutBegin(*session_, items, tier);
  results_.resize(begun.size());
  for (size_t i = 0; i < begun.size(); ++i) results_[i] = ResultOf(begun[i]);
  return protocol::WriteBlockResults(arena_, request, results_);
}

absl::StatusOr<Completion> RequestDispatcher::PutCommit(const Request& request) {
  std::vector<protocol::PutCommitItem> items;
  KVTIER_RETURN_IF_ERROR(protocol::ReadPutCommit(arena_, request, &items));
  std::vector<BlockCode> out = service_.PutCommit(*session_, items);
  results_.resize(out.size());
  for (size_t i = 0; i < out.size(); ++i) results_[i] = ResultOf(out[i]);
  return protocol::WriteBlockResults(arena_, request, results_);
}

absl::StatusOr<Completion> RequestDispatcher::KeysOp(const Request& request) {
  KVTIER_RETURN_IF_ERROR(protocol::ReadKeys(arena_, request, &keys_));
  std::vector<BlockCode> out;
  if (request.op == Op::kPutAbort) out = service_.PutAbort(*session_, keys_);
  if (request.op == Op::kRelease) out = service_.Release(*session_, keys_);
  if (request.op == Op::kDrop) out = service_.Drop(*session_, keys_);
  results_.resize(out.size());
  for (size_t i = 0; i < out.size(); ++i) results_[i] = ResultOf(out[i]);
  return protocol::WriteBlockResults(arena_, request, results_);
}

absl::StatusOr<Tier> RequestDispatcher::WritableTier(const Request& request) const {
  if (request.tier == static_cast<uint8_t>(Tier::kT1)) return Tier::kT1;
  if (request.tier == static_cast<uint8_t>(Tier::kT0) && service_.has_t0()) return Tier::kT0;
  return absl::InvalidArgumentError(fmt::format(
      "request {} ({}): tier {} cannot be written; this daemon takes puts and working slots in {}",
      request.request_id, protocol::OpName(static_cast<uint8_t>(request.op)), request.tier,
      service_.has_t0() ? "T0 (0) and T1 (1)" : "T1 (1) (it runs without T0)"));
}

absl::StatusOr<Completion> RequestDispatcher::WorkOp(const Request& request) {
  KVTIER_ASSIGN_OR_RETURN(const Tier tier, WritableTier(request));
  if (request.op == Op::kWorkTake) {
    std::vector<SlotResult> taken = service_.WorkTake(*session_, tier, request.count);
    results_.resize(taken.size());
    for (size_t i = 0; i < taken.size(); ++i) results_[i] = ResultOf(taken[i]);
  } else if (request.op == Op::kWorkPublish) {
    KVTIER_RETURN_IF_ERROR(
        protocol::ReadWorkPublish(arena_, request, service_.slot_bytes(), &publish_));
    std::vector<SlotResult> published = service_.WorkPublish(*session_, tier, publish_);
    results_.resize(published.size());
    for (size_t i = 0; i < published.size(); ++i) results_[i] = ResultOf(published[i]);
  } else {
    KVTIER_RETURN_IF_ERROR(protocol::ReadWorkSlots(arena_, request, &slots_));
    std::vector<BlockCode> freed = service_.WorkFree(*session_, tier, slots_);
    results_.resize(freed.size());
    for (size_t i = 0; i < freed.size(); ++i) results_[i] = ResultOf(freed[i]);
  }
  return protocol::WriteBlockResults(arena_, request, results_);
}

Completion RequestDispatcher::Stats(const Request& request) {
  const ServiceStats s = service_.Stats();
  protocol::StatsWire w{};
  w.lookups = s.lookups;
  w.lookup_keys = s.lookup_keys;
  w.lookup_hit_blocks = s.lookup_hit_blocks;
  w.gets = s.gets;
  w.get_blocks = s.get_blocks;
  w.promotions = s.promotions;
  w.puts_begun = s.puts_begun;
  w.puts_committed = s.puts_committed;
  w.puts_aborted = s.puts_aborted;
  w.puts_retry = s.puts_retry;
  w.releases = s.releases;
  w.drops = s.drops;
  w.t1_slots_total = s.t1_slots_total;
  w.t1_slots_free = s.t1_slots_free;
  w.leases_held = s.leases_held;
  w.requests_invalid = s.requests_invalid;
  return protocol::WriteStats(arena_, request, w);
}

}  // namespace kvtier
