// Encoding and validating decoding of the data plane: ring records (RequestRecord,
// CompletionRecord) and the arena arguments and results they name (wire_format.h; docs/protocol.md
// "Ops").
//
// Trust. The daemon decodes what a client wrote into shared memory, and that client may change
// those bytes at any moment, maliciously or by a bug. So every decoder here first copies the bytes
// out of shared memory into private memory, then validates the copy, and hands back only values it
// validated (no time-of-check/time-of-use gap). A request's ranges are checked against the arena's
// bounds; arguments are checked against the request they belong to. Clients decode the daemon's
// completions and results with the same care (a client survives a confused daemon).
//
// Errors: every decoder returns InvalidArgument naming what was wrong and where ("request 7
// (lookup): arg range [4096, +8) is not count*16 = 16 bytes"); none crashes, reads out of bounds
// or allocates more than kMaxBatchKeys items on any input. Encoders assume valid input (they are
// called with values the caller built) and never fail.
//
// Thread-safety: pure functions over the memory passed in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "client/protocol/wire_format.h"
#include "common/status.h"
#include "index/block_key.h"

namespace kvtier::protocol {

// A byte range in the arena.
struct ArenaRange {
  uint32_t offset = 0;
  uint32_t bytes = 0;
  friend bool operator==(const ArenaRange&, const ArenaRange&) = default;
};

// The arena as mapped by this process: `bytes` bytes at `base`, shared with the peer.
struct ArenaView {
  std::byte* base = nullptr;
  uint32_t bytes = 0;
};

// A request as validated by DecodeRequest.
struct Request {
  Op op = Op::kNop;
  uint64_t request_id = 0;
  uint32_t count = 0;  // keys, items or slots; 0 for kNop and kStats
  // kGet: the tier read from (< kNumTiers); kPutBegin and kWork*: the slots' tier (0 or 1); else 0.
  uint8_t tier = 0;
  ArenaRange arg;     // exactly ArgBytes(op, count) bytes
  ArenaRange result;  // exactly ResultBytes(op, count) bytes
  friend bool operator==(const Request&, const Request&) = default;
};

struct Completion {
  Op op = Op::kNop;
  uint64_t request_id = 0;
  RequestStatus status = RequestStatus::kOk;
  uint32_t count = 0;  // kLookup: n; else the request's count
  ArenaRange result;   // the results written (offset as requested, bytes written)
  friend bool operator==(const Completion&, const Completion&) = default;
};

// "lookup", "put_begin", ...; "op(N)" for unknown values.
std::string OpName(uint8_t op);
// Bytes of arguments / results that `count` keys (items, slots) of `op` take in the arena.
uint32_t ArgBytes(Op op, uint32_t count);
uint32_t ResultBytes(Op op, uint32_t count);

// ---- records ----------------------------------------------------------------------------------

void EncodeRequest(const Request& request, std::byte* record);  // writes kRecordBytes bytes
// Validates header (magic, version, size, flags, op), count and tier for the op, reserved bytes,
// and that both ranges are 8-byte aligned, exactly sized for the op, and inside [0, arena_bytes).
// Count: 0 for kNop and kStats, 1 to kMaxBatchKeys for every other op. Tier: below kNumTiers for
// kGet, 0 or 1 for kPutBegin and the kWork* ops, 0 for the rest. Whether the daemon has the tier
// named is the daemon's question, not the codec's.
absl::StatusOr<Request> DecodeRequest(absl::Span<const std::byte> record, uint32_t arena_bytes);

void EncodeCompletion(const Completion& completion, std::byte* record);
absl::StatusOr<Completion> DecodeCompletion(absl::Span<const std::byte> record,
                                            uint32_t arena_bytes);

// ---- arena arguments (client writes, daemon reads) --------------------------------------------

struct PutBeginItem {
  BlockKey key;
  std::optional<BlockKey> parent;
  uint32_t payload_bytes = 0;
  friend bool operator==(const PutBeginItem&, const PutBeginItem&) = default;
};
struct PutCommitItem {
  BlockKey key;
  uint64_t checksum = 0;
  friend bool operator==(const PutCommitItem&, const PutCommitItem&) = default;
};
// kWorkPublish: the working slot `slot` (of the request's tier) becomes the cached block `key`.
struct WorkPublishItem {
  BlockKey key;
  std::optional<BlockKey> parent;
  uint64_t checksum = 0;  // XXH3-64 of the slot's first payload_bytes bytes
  uint32_t slot = 0;
  uint32_t payload_bytes = 0;
  friend bool operator==(const WorkPublishItem&, const WorkPublishItem&) = default;
};

// Client side: writes the arguments at `range` (which must be ArgBytes(op, items.size()) bytes
// inside the arena).
void WriteKeys(ArenaView arena, ArenaRange range, absl::Span<const BlockKey> keys);
void WritePutBegin(ArenaView arena, ArenaRange range, absl::Span<const PutBeginItem> items);
void WritePutCommit(ArenaView arena, ArenaRange range, absl::Span<const PutCommitItem> items);
void WriteWorkPublish(ArenaView arena, ArenaRange range, absl::Span<const WorkPublishItem> items);
void WriteWorkSlots(ArenaView arena, ArenaRange range, absl::Span<const uint32_t> slots);

// Daemon side: copies the arguments of `request` (from DecodeRequest on this arena) out of the
// arena and validates the copy. `out` is replaced (its capacity is reused). Errors:
// InvalidArgument for an op without keys / the wrong op, bad flags, reserved fields not zero, a
// payload size of 0 or above slot_bytes (the slot size of the request's tier). Slot numbers are
// not checked here: a slot that is not one of the session's working slots is a per-slot kMissing,
// which only the daemon can tell.
absl::Status ReadKeys(ArenaView arena, const Request& request, std::vector<BlockKey>* out);
absl::Status ReadPutBegin(ArenaView arena, const Request& request, uint32_t slot_bytes,
                          std::vector<PutBeginItem>* out);
absl::Status ReadPutCommit(ArenaView arena, const Request& request,
                           std::vector<PutCommitItem>* out);
// kWorkPublish.
absl::Status ReadWorkPublish(ArenaView arena, const Request& request, uint32_t slot_bytes,
                             std::vector<WorkPublishItem>* out);
// kWorkFree: the slots given back.
absl::Status ReadWorkSlots(ArenaView arena, const Request& request, std::vector<uint32_t>* out);

// ---- arena results (daemon writes, client reads) ----------------------------------------------

// Daemon side: write the results into request.result and return the completion to post.
// Preconditions: `request` came from DecodeRequest on this arena; tiers.size() == request.count
// and n <= count; results.size() == request.count.
Completion WriteLookupResult(ArenaView arena, const Request& request, uint32_t n,
                             absl::Span<const uint8_t> tiers);
Completion WriteBlockResults(ArenaView arena, const Request& request,
                             absl::Span<const BlockResult> results);
Completion WriteStats(ArenaView arena, const Request& request, const StatsWire& stats);
// A completion with no results (kNop, or a request that failed as a whole).
Completion EmptyCompletion(const Request& request, RequestStatus status);

// What a client knows about its session, to check results against (from its Welcome; the T0
// fields are 0 when the daemon has no T0).
struct SessionLimits {
  uint32_t t1_slots = 0;
  uint32_t t1_slot_bytes = 0;
  uint32_t t0_slots = 0;
  uint32_t t0_slot_bytes = 0;
};

// Client side: `completion` (from DecodeCompletion) answers `request` (what this client sent).
// Copies the results out and validates them: tier masks within the tiers and n <= count; block
// codes known (<= kMaxBlockCode), and where a result gives a slot (kOk of get, put_begin,
// work_take, work_publish) a slot below the slot count of the request's tier (T0's for tier 0,
// T1's otherwise) and a payload size at most that tier's slot bytes; no slot and size otherwise.
absl::Status ReadLookupResult(ArenaView arena, const Request& request, const Completion& completion,
                              std::vector<uint8_t>* tiers);
absl::Status ReadBlockResults(ArenaView arena, const Request& request, const Completion& completion,
                              const SessionLimits& limits, std::vector<BlockResult>* out);
absl::StatusOr<StatsWire> ReadStats(ArenaView arena, const Request& request,
                                    const Completion& completion);

}  // namespace kvtier::protocol
