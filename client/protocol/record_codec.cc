#include "client/protocol/record_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "client/protocol/record_name.h"

namespace kvtier::protocol {
namespace {

constexpr const char* kOpNames[] = {"nop",        "lookup",    "get",          "put_begin",
                                    "put_commit", "put_abort", "release",      "drop",
                                    "stats",      "work_take", "work_publish", "work_free"};
static_assert(std::size(kOpNames) == kMaxOp + 1);

// Ops whose count is 1 to kMaxBatchKeys (keys, items or slots); the others carry count 0.
bool HasItems(Op op) { return op != Op::kNop && op != Op::kStats; }

// Ops whose arguments are plain keys (ReadKeys).
bool TakesKeys(Op op) {
  return op == Op::kLookup || op == Op::kGet || op == Op::kPutAbort || op == Op::kRelease ||
         op == Op::kDrop;
}

// Ops whose tier names the tier of their slots: 0 (T0) or 1 (T1).
bool NamesSlotTier(Op op) {
  return op == Op::kPutBegin || op == Op::kWorkTake || op == Op::kWorkPublish ||
         op == Op::kWorkFree;
}

uint32_t ArgItemBytes(Op op) {
  switch (op) {
    case Op::kNop:
    case Op::kStats:
    case Op::kWorkTake:
      return 0;
    case Op::kPutBegin:
      return sizeof(PutBeginArg);
    case Op::kPutCommit:
      return sizeof(PutCommitArg);
    case Op::kWorkPublish:
      return sizeof(WorkPublishArg);
    case Op::kWorkFree:
      return sizeof(WorkSlotArg);
    default:
      return sizeof(WireKey);
  }
}

bool AllZero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

absl::Status CheckRange(const RecordName& where, const char* name, ArenaRange r,
                        uint32_t expected_bytes, bool exact, uint32_t arena_bytes) {
  if (exact ? r.bytes != expected_bytes : r.bytes > expected_bytes) {
    return Invalid(fmt::format("{}: {} range [{}, +{}) is {} bytes, expected {}{}", where, name,
                               r.offset, r.bytes, r.bytes, exact ? "" : "at most ",
                               expected_bytes));
  }
  if (r.bytes == 0) {
    if (r.offset != 0)
      return Invalid(fmt::format("{}: empty {} range has offset {}", where, name, r.offset));
    return absl::OkStatus();
  }
  if (r.offset % kArenaAlign != 0) {
    return Invalid(
        fmt::format("{}: {} offset {} is not {}-byte aligned", where, name, r.offset, kArenaAlign));
  }
  if (uint64_t{r.offset} + r.bytes > arena_bytes) {
    return Invalid(fmt::format("{}: {} range [{}, +{}) is outside the arena of {} bytes", where,
                               name, r.offset, r.bytes, arena_bytes));
  }
  return absl::OkStatus();
}

template <typename Record>
absl::Status CheckHeader(const char* kind, const Record& rec, uint16_t magic) {
  if (rec.magic != magic) {
    return Invalid(
        fmt::format("{} record: bad magic 0x{:04x} (expected 0x{:04x})", kind, rec.magic, magic));
  }
  if (rec.version != kProtocolVersion) {
    return Invalid(fmt::format("{} record: version {} (this side speaks {})", kind, rec.version,
                               kProtocolVersion));
  }
  if (rec.record_bytes != kRecordBytes) {
    return Invalid(fmt::format("{} record: record_bytes {} (expected {})", kind, rec.record_bytes,
                               kRecordBytes));
  }
  if (rec.op > kMaxOp) {
    return Invalid(fmt::format("{} {}: unknown op {}", kind, rec.request_id, rec.op));
  }
  return absl::OkStatus();
}

absl::Status CheckCountAndTier(const RecordName& where, const RequestRecord& rec) {
  const Op op = static_cast<Op>(rec.op);
  if (!HasItems(op) && rec.count != 0) {
    return Invalid(fmt::format("{}: count {} (must be 0)", where, rec.count));
  }
  if (HasItems(op) && (rec.count == 0 || rec.count > kMaxBatchKeys)) {
    return Invalid(fmt::format("{}: count {} outside [1, {}]", where, rec.count, kMaxBatchKeys));
  }
  const uint8_t most = op == Op::kGet ? kNumTiers - 1 : NamesSlotTier(op) ? 1 : 0;
  if (rec.tier > most) {
    return Invalid(fmt::format("{}: tier {} not allowed (at most {})", where, rec.tier, most));
  }
  return absl::OkStatus();
}

// Copies `count` items of T out of the arena at `offset` (validated by the caller).
template <typename T>
void CopyOut(ArenaView arena, uint32_t offset, uint32_t count, T* dst) {
  std::memcpy(dst, arena.base + offset, size_t{count} * sizeof(T));
}

BlockKey FromWire(const WireKey& k) { return BlockKey{k.lo, k.hi}; }

// Flags of a put_begin or work_publish item: kPutHasParent or nothing, and no parent without it.
bool ParentFlagsOk(uint32_t flags, const WireKey& parent) {
  return (flags & ~kPutHasParent) == 0 &&
         ((flags & kPutHasParent) != 0 || (parent.lo | parent.hi) == 0);
}
std::optional<BlockKey> ParentOf(uint32_t flags, const WireKey& parent) {
  return (flags & kPutHasParent) ? std::optional(FromWire(parent)) : std::nullopt;
}
WireKey ToWire(const BlockKey& k) { return WireKey{k.lo, k.hi}; }

// `allowed`: the request's op takes the arguments being read (named `what`).
absl::Status CheckArgs(const Request& request, bool allowed, const char* what, ArenaView arena) {
  const RecordName where{"request", request.request_id, static_cast<uint8_t>(request.op)};
  if (!allowed) return Invalid(fmt::format("{}: has no {} arguments", where, what));
  if (request.count > kMaxBatchKeys) {  // also keeps ArgBytes from overflowing
    return Invalid(fmt::format("{}: count {} above {}", where, request.count, kMaxBatchKeys));
  }
  // Re-checked here so a Request not from DecodeRequest cannot read out of bounds.
  return CheckRange(where, "arg", request.arg, ArgBytes(request.op, request.count), true,
                    arena.bytes);
}

}  // namespace

std::string OpName(uint8_t op) {
  if (op <= kMaxOp) return kOpNames[op];
  return fmt::format("op({})", op);
}

uint32_t ArgBytes(Op op, uint32_t count) { return ArgItemBytes(op) * count; }

uint32_t ResultBytes(Op op, uint32_t count) {
  switch (op) {
    case Op::kNop:
      return 0;
    case Op::kStats:
      return sizeof(StatsWire);
    case Op::kLookup:
      return (count + kArenaAlign - 1) / kArenaAlign * kArenaAlign;  // one TierMask per key
    default:
      return count * sizeof(BlockResult);
  }
}

void EncodeRequest(const Request& request, std::byte* record) {
  RequestRecord rec{};
  rec.magic = kRequestMagic;
  rec.version = kProtocolVersion;
  rec.op = static_cast<uint8_t>(request.op);
  rec.record_bytes = kRecordBytes;
  rec.request_id = request.request_id;
  rec.count = request.count;
  rec.tier = request.tier;
  rec.arg_offset = request.arg.offset;
  rec.arg_bytes = request.arg.bytes;
  rec.result_offset = request.result.offset;
  rec.result_bytes = request.result.bytes;
  std::memcpy(record, &rec, sizeof(rec));
}

absl::StatusOr<Request> DecodeRequest(absl::Span<const std::byte> record, uint32_t arena_bytes) {
  if (record.size() != kRecordBytes) {
    return Invalid(
        fmt::format("request record: {} bytes (expected {})", record.size(), kRecordBytes));
  }
  RequestRecord rec;
  std::memcpy(&rec, record.data(), sizeof(rec));  // from here on only the private copy is read
  KVTIER_RETURN_IF_ERROR(CheckHeader("request", rec, kRequestMagic));
  const RecordName where{"request", rec.request_id, rec.op};
  if (rec.flags != 0 || !AllZero(rec.reserved0, sizeof(rec.reserved0)) ||
      !AllZero(rec.reserved1, sizeof(rec.reserved1))) {
    return Invalid(fmt::format("{}: flags or reserved bytes are not zero", where));
  }
  KVTIER_RETURN_IF_ERROR(CheckCountAndTier(where, rec));
  Request r;
  r.op = static_cast<Op>(rec.op);
  r.request_id = rec.request_id;
  r.count = rec.count;
  r.tier = rec.tier;
  r.arg = {rec.arg_offset, rec.arg_bytes};
  r.result = {rec.result_offset, rec.result_bytes};
  KVTIER_RETURN_IF_ERROR(
      CheckRange(where, "arg", r.arg, ArgBytes(r.op, r.count), true, arena_bytes));
  KVTIER_RETURN_IF_ERROR(
      CheckRange(where, "result", r.result, ResultBytes(r.op, r.count), true, arena_bytes));
  return r;
}

void EncodeCompletion(const Completion& completion, std::byte* record) {
  CompletionRecord rec{};
  rec.magic = kCompletionMagic;
  rec.version = kProtocolVersion;
  rec.op = static_cast<uint8_t>(completion.op);
  rec.record_bytes = kRecordBytes;
  rec.status = static_cast<uint16_t>(completion.status);
  rec.request_id = completion.request_id;
  rec.count = completion.count;
  rec.result_offset = completion.result.offset;
  rec.result_bytes = completion.result.bytes;
  std::memcpy(record, &rec, sizeof(rec));
}

absl::StatusOr<Completion> DecodeCompletion(absl::Span<const std::byte> record,
                                            uint32_t arena_bytes) {
  if (record.size() != kRecordBytes) {
    return Invalid(
        fmt::format("completion record: {} bytes (expected {})", record.size(), kRecordBytes));
  }
  CompletionRecord rec;
  std::memcpy(&rec, record.data(), sizeof(rec));
  KVTIER_RETURN_IF_ERROR(CheckHeader("completion", rec, kCompletionMagic));
  const RecordName where{"completion", rec.request_id, rec.op};
  if (rec.status > kMaxRequestStatus) {
    return Invalid(fmt::format("{}: unknown status {}", where, rec.status));
  }
  if (!AllZero(rec.reserved, sizeof(rec.reserved))) {
    return Invalid(fmt::format("{}: reserved bytes are not zero", where));
  }
  if (rec.count > kMaxBatchKeys) {
    return Invalid(fmt::format("{}: count {} above {}", where, rec.count, kMaxBatchKeys));
  }
  Completion c;
  c.op = static_cast<Op>(rec.op);
  c.request_id = rec.request_id;
  c.status = static_cast<RequestStatus>(rec.status);
  c.count = rec.count;
  c.result = {rec.result_offset, rec.result_bytes};
  KVTIER_RETURN_IF_ERROR(
      CheckRange(where, "result", c.result, ResultBytes(c.op, kMaxBatchKeys), false, arena_bytes));
  return c;
}

void WriteKeys(ArenaView arena, ArenaRange range, absl::Span<const BlockKey> keys) {
  for (size_t i = 0; i < keys.size(); ++i) {
    const WireKey w = ToWire(keys[i]);
    std::memcpy(arena.base + range.offset + i * sizeof(WireKey), &w, sizeof(w));
  }
}

void WritePutBegin(ArenaView arena, ArenaRange range, absl::Span<const PutBeginItem> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    PutBeginArg a{};
    a.key = ToWire(items[i].key);
    if (items[i].parent) {
      a.parent = ToWire(*items[i].parent);
      a.flags = kPutHasParent;
    }
    a.payload_bytes = items[i].payload_bytes;
    std::memcpy(arena.base + range.offset + i * sizeof(a), &a, sizeof(a));
  }
}

void WritePutCommit(ArenaView arena, ArenaRange range, absl::Span<const PutCommitItem> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    const PutCommitArg a{ToWire(items[i].key), items[i].checksum};
    std::memcpy(arena.base + range.offset + i * sizeof(a), &a, sizeof(a));
  }
}

void WriteWorkPublish(ArenaView arena, ArenaRange range, absl::Span<const WorkPublishItem> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    const WorkPublishItem& item = items[i];
    WorkPublishArg a{};
    a.key = ToWire(item.key);
    if (item.parent) {
      a.parent = ToWire(*item.parent);
      a.flags = kPutHasParent;
    }
    a.checksum = item.checksum;
    a.slot = item.slot;
    a.payload_bytes = item.payload_bytes;
    std::memcpy(arena.base + range.offset + i * sizeof(a), &a, sizeof(a));
  }
}

void WriteWorkSlots(ArenaView arena, ArenaRange range, absl::Span<const uint32_t> slots) {
  for (size_t i = 0; i < slots.size(); ++i) {
    const WorkSlotArg a{slots[i], 0};
    std::memcpy(arena.base + range.offset + i * sizeof(a), &a, sizeof(a));
  }
}

absl::Status ReadKeys(ArenaView arena, const Request& request, std::vector<BlockKey>* out) {
  KVTIER_RETURN_IF_ERROR(CheckArgs(request, TakesKeys(request.op), "key", arena));
  out->resize(request.count);
  for (uint32_t i = 0; i < request.count; ++i) {
    WireKey w;
    CopyOut(arena, request.arg.offset + i * uint32_t{sizeof(w)}, 1, &w);
    (*out)[i] = FromWire(w);
  }
  return absl::OkStatus();
}

absl::Status ReadPutBegin(ArenaView arena, const Request& request, uint32_t slot_bytes,
                          std::vector<PutBeginItem>* out) {
  KVTIER_RETURN_IF_ERROR(CheckArgs(request, request.op == Op::kPutBegin, "put_begin", arena));
  const RecordName where{"request", request.request_id, static_cast<uint8_t>(Op::kPutBegin)};
  out->resize(request.count);
  for (uint32_t i = 0; i < request.count; ++i) {
    PutBeginArg a;  // each item is copied once and only the copy is checked and used
    CopyOut(arena, request.arg.offset + i * uint32_t{sizeof(a)}, 1, &a);
    if (!ParentFlagsOk(a.flags, a.parent)) {
      return Invalid(fmt::format("{}: block {}: bad flags 0x{:x}", where, i, a.flags));
    }
    if (a.payload_bytes == 0 || a.payload_bytes > slot_bytes) {
      return Invalid(fmt::format("{}: block {}: payload_bytes {} outside [1, {}]", where, i,
                                 a.payload_bytes, slot_bytes));
    }
    PutBeginItem& item = (*out)[i];
    item.key = FromWire(a.key);
    item.parent = ParentOf(a.flags, a.parent);
    item.payload_bytes = a.payload_bytes;
  }
  return absl::OkStatus();
}

absl::Status ReadPutCommit(ArenaView arena, const Request& request,
                           std::vector<PutCommitItem>* out) {
  KVTIER_RETURN_IF_ERROR(CheckArgs(request, request.op == Op::kPutCommit, "put_commit", arena));
  out->resize(request.count);
  for (uint32_t i = 0; i < request.count; ++i) {
    PutCommitArg a;
    CopyOut(arena, request.arg.offset + i * uint32_t{sizeof(a)}, 1, &a);
    (*out)[i] = PutCommitItem{FromWire(a.key), a.checksum};
  }
  return absl::OkStatus();
}

absl::Status ReadWorkPublish(ArenaView arena, const Request& request, uint32_t slot_bytes,
                             std::vector<WorkPublishItem>* out) {
  KVTIER_RETURN_IF_ERROR(CheckArgs(request, request.op == Op::kWorkPublish, "work_publish", arena));
  const RecordName where{"request", request.request_id, static_cast<uint8_t>(Op::kWorkPublish)};
  out->resize(request.count);
  for (uint32_t i = 0; i < request.count; ++i) {
    WorkPublishArg a;  // copied once; only the copy is checked and used
    CopyOut(arena, request.arg.offset + i * uint32_t{sizeof(a)}, 1, &a);
    if (!ParentFlagsOk(a.flags, a.parent)) {
      return Invalid(fmt::format("{}: item {}: bad flags 0x{:x}", where, i, a.flags));
    }
    if (a.reserved != 0) {
      return Invalid(fmt::format("{}: item {}: reserved field is {}, not 0", where, i, a.reserved));
    }
    if (a.payload_bytes == 0 || a.payload_bytes > slot_bytes) {
      return Invalid(fmt::format("{}: item {}: payload_bytes {} outside [1, {}]", where, i,
                                 a.payload_bytes, slot_bytes));
    }
    (*out)[i] = WorkPublishItem{FromWire(a.key), ParentOf(a.flags, a.parent), a.checksum, a.slot,
                                a.payload_bytes};
  }
  return absl::OkStatus();
}

absl::Status ReadWorkSlots(ArenaView arena, const Request& request, std::vector<uint32_t>* out) {
  KVTIER_RETURN_IF_ERROR(CheckArgs(request, request.op == Op::kWorkFree, "work_free", arena));
  const RecordName where{"request", request.request_id, static_cast<uint8_t>(Op::kWorkFree)};
  out->resize(request.count);
  for (uint32_t i = 0; i < request.count; ++i) {
    WorkSlotArg a;
    CopyOut(arena, request.arg.offset + i * uint32_t{sizeof(a)}, 1, &a);
    if (a.reserved != 0) {
      return Invalid(fmt::format("{}: item {}: reserved field is {}, not 0", where, i, a.reserved));
    }
    (*out)[i] = a.slot;
  }
  return absl::OkStatus();
}

}  // namespace kvtier::protocol
