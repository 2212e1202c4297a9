// Arena results of record_codec.h: written by the daemon, read and checked by clients.
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "client/protocol/record_codec.h"
#include "client/protocol/record_name.h"

namespace kvtier::protocol {
namespace {

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

Completion CompletionFor(const Request& request, uint32_t count, uint32_t result_bytes) {
  Completion c;
  c.op = request.op;
  c.request_id = request.request_id;
  c.status = RequestStatus::kOk;
  c.count = count;
  c.result = {result_bytes == 0 ? 0 : request.result.offset, result_bytes};
  return c;
}

// The checks every result reader makes: `completion` answers `request`, succeeded, and carries
// exactly the result range the request asked for, inside the arena.
absl::Status CheckAnswer(ArenaView arena, const Request& request, const Completion& c) {
  const RecordName where{"completion", c.request_id, static_cast<uint8_t>(c.op)};
  if (c.request_id != request.request_id || c.op != request.op) {
    return Invalid(fmt::format("{}: answers request {} ({})", where, request.request_id,
                               OpName(static_cast<uint8_t>(request.op))));
  }
  if (c.status != RequestStatus::kOk) {
    return Invalid(
        fmt::format("{}: status {}, no results", where, static_cast<unsigned>(c.status)));
  }
  if (request.count > kMaxBatchKeys) {  // also keeps ResultBytes from overflowing
    return Invalid(
        fmt::format("{}: request count {} above {}", where, request.count, kMaxBatchKeys));
  }
  const uint32_t want = ResultBytes(request.op, request.count);
  if (c.result.bytes != want || c.result.offset != request.result.offset ||
      uint64_t{c.result.offset} + c.result.bytes > arena.bytes) {
    return Invalid(fmt::format("{}: result range [{}, +{}), expected [{}, +{}) in {} bytes", where,
                               c.result.offset, c.result.bytes, request.result.offset, want,
                               arena.bytes));
  }
  return absl::OkStatus();
}

// Ops whose kOk result gives a slot (and a payload size) of the request's tier.
bool GivesSlot(Op op) {
  return op == Op::kGet || op == Op::kPutBegin || op == Op::kWorkTake || op == Op::kWorkPublish;
}

absl::Status CheckBlockResult(const Request& request, uint32_t i, const BlockResult& r,
                              const SessionLimits& limits) {
  const auto fail = [&](std::string what) {
    return Invalid(fmt::format("completion {} ({}): block {}: {}", request.request_id,
                               OpName(static_cast<uint8_t>(request.op)), i, what));
  };
  if (r.code > kMaxBlockCode) return fail(fmt::format("unknown code {}", r.code));
  if (r.reserved != 0) return fail("reserved field is not zero");
  if (r.code != static_cast<uint32_t>(BlockCode::kOk) || !GivesSlot(request.op)) {
    if (r.slot != 0 || r.payload_bytes != 0) return fail("slot or size given without a slot");
    return absl::OkStatus();
  }
  const bool t0 = request.tier == static_cast<uint8_t>(Tier::kT0);
  const uint32_t slots = t0 ? limits.t0_slots : limits.t1_slots;
  const uint32_t slot_bytes = t0 ? limits.t0_slot_bytes : limits.t1_slot_bytes;
  if (r.slot >= slots) {
    return fail(fmt::format("slot {} outside [0, {}) of T{}", r.slot, slots, t0 ? 0 : 1));
  }
  if (r.payload_bytes > slot_bytes) {
    return fail(fmt::format("payload_bytes {} above slot_bytes {} of T{}", r.payload_bytes,
                            slot_bytes, t0 ? 0 : 1));
  }
  return absl::OkStatus();
}

}  // namespace

Completion WriteLookupResult(ArenaView arena, const Request& request, uint32_t n,
                             absl::Span<const uint8_t> tiers) {
  const uint32_t bytes = ResultBytes(request.op, request.count);
  std::byte* dst = arena.base + request.result.offset;
  std::memcpy(dst, tiers.data(), tiers.size());
  std::memset(dst + tiers.size(), 0, bytes - tiers.size());  // padding, and masks past n
  if (n < tiers.size()) std::memset(dst + n, 0, tiers.size() - n);
  return CompletionFor(request, n, bytes);
}

Completion WriteBlockResults(ArenaView arena, const Request& request,
                             absl::Span<const BlockResult> results) {
  std::memcpy(arena.base + request.result.offset, results.data(),
              results.size() * sizeof(BlockResult));
  return CompletionFor(request, request.count, ResultBytes(request.op, request.count));
}

Completion WriteStats(ArenaView arena, const Request& request, const StatsWire& stats) {
  std::memcpy(arena.base + request.result.offset, &stats, sizeof(stats));
  return CompletionFor(request, 0, sizeof(stats));
}

Completion EmptyCompletion(const Request& request, RequestStatus status) {
  Completion c = CompletionFor(request, request.op == Op::kLookup ? 0 : request.count, 0);
  c.status = status;
  return c;
}

absl::Status ReadLookupResult(ArenaView arena, const Request& request, const Completion& completion,
                              std::vector<uint8_t>* tiers) {
  if (request.op != Op::kLookup) return Invalid("ReadLookupResult: not a lookup");
  KVTIER_RETURN_IF_ERROR(CheckAnswer(arena, request, completion));
  if (completion.count > request.count) {
    return Invalid(fmt::format("completion {} (lookup): n = {} above count {}",
                               completion.request_id, completion.count, request.count));
  }
  tiers->resize(completion.count);
  if (completion.count == 0) return absl::OkStatus();  // an empty prefix: nothing to copy
  std::memcpy(tiers->data(), arena.base + completion.result.offset, completion.count);
  for (uint32_t i = 0; i < completion.count; ++i) {
    const uint8_t mask = (*tiers)[i];
    if (mask == 0 || mask >= (1u << kNumTiers)) {
      return Invalid(
          fmt::format("completion {} (lookup): block {} of the prefix has tier mask "
                      "0x{:x}",
                      completion.request_id, i, mask));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadBlockResults(ArenaView arena, const Request& request, const Completion& completion,
                              const SessionLimits& limits, std::vector<BlockResult>* out) {
  if (request.op == Op::kNop || request.op == Op::kLookup || request.op == Op::kStats ||
      static_cast<uint8_t>(request.op) > kMaxOp) {
    return Invalid(fmt::format("ReadBlockResults: op {} has no block results",
                               OpName(static_cast<uint8_t>(request.op))));
  }
  KVTIER_RETURN_IF_ERROR(CheckAnswer(arena, request, completion));
  if (completion.count != request.count) {
    return Invalid(fmt::format("completion {}: count {} (request had {})", completion.request_id,
                               completion.count, request.count));
  }
  out->resize(request.count);
  if (request.count == 0) return absl::OkStatus();
  std::memcpy(out->data(), arena.base + completion.result.offset,
              size_t{request.count} * sizeof(BlockResult));
  for (uint32_t i = 0; i < request.count; ++i) {
    KVTIER_RETURN_IF_ERROR(CheckBlockResult(request, i, (*out)[i], limits));
  }
  return absl::OkStatus();
}

absl::StatusOr<StatsWire> ReadStats(ArenaView arena, const Request& request,
                                    const Completion& completion) {
  if (request.op != Op::kStats) return Invalid("ReadStats: not a stats request");
  KVTIER_RETURN_IF_ERROR(CheckAnswer(arena, request, completion));
  StatsWire stats;
  std::memcpy(&stats, arena.base + completion.result.offset, sizeof(stats));
  return stats;
}

}  // namespace kvtier::protocol
