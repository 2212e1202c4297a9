// The kvtier client protocol's wire format: every byte layout shared by kvtierd and its clients
// (DESIGN.md "Process model and protocol"; docs/protocol.md is the prose form of this file).
//
// Two planes:
//   - control: length-prefixed frames on a Unix-domain stream socket (FrameHeader + payload);
//     the daemon's Welcome carries file descriptors over SCM_RIGHTS.
//   - data: per-client rings of 64-byte records in a shared memfd (RequestRecord on the
//     submission ring, CompletionRecord on the completion ring), whose variable-size arguments and
//     results live in an arena in the same memfd, named by (offset, bytes).
//
// Everything is little-endian, fixed-width, naturally aligned and free of implicit padding (the
// static_asserts below pin every offset). Structs here are layouts, not objects to share: the codec
// (record_codec.h, frame_codec.h) memcpy's them out of untrusted bytes before reading a field.
// Reserved fields and flags are zero when sent and refused when not zero, so a later version can
// give them meaning. Changing any layout bumps kProtocolVersion.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "index/tier.h"

namespace kvtier::protocol {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian and the structs below are memcpy'd as is");

// 1: the first. 2: Welcome carries the T0 section (WelcomeT0). 3: put_begin names its tier (T0 or
// T1); working slots (work_take, work_publish, work_free); BlockCode kOverQuota. 4: lookup masks
// may carry bit 3 (T3, the remote tier), and a lookup may take up to the daemon's remote lookup
// budget; no layout changed. 5: Hello carries a seventh text field, the pool the client asks for
// (empty: the one it may use; docs/protocol.md "Trust and isolation").
inline constexpr uint16_t kProtocolVersion = 5;

// ---- control plane: socket frames ------------------------------------------------------------

inline constexpr uint32_t kFrameMagic = 0x5054564B;  // "KVTP" as bytes
inline constexpr uint32_t kMaxFramePayload = 64 * 1024;

// Frame types. Hello: client -> daemon, first frame. Welcome: daemon -> client, answer to Hello,
// with kWelcomeFdCount fds. Error: either way, the sender closes after it.
enum class FrameType : uint16_t { kHello = 1, kWelcome = 2, kError = 3 };

// Frozen across versions (so any version can read another's Error frame): magic, version, type,
// payload length.
struct FrameHeader {
  uint32_t magic;          // kFrameMagic
  uint16_t version;        // kProtocolVersion of the sender
  uint16_t type;           // FrameType
  uint32_t payload_bytes;  // bytes after this header, <= kMaxFramePayload
  uint32_t reserved;       // 0
};
static_assert(sizeof(FrameHeader) == 16);
static_assert(offsetof(FrameHeader, payload_bytes) == 8);

// Hello payload: HelloFixed, then the namespace's text fields, each a u16 byte length and that
// many bytes, in this order: model_id, kv_layout, dtype, lora_id, cache_salt, client_name, pool
// (since version 5).
inline constexpr uint32_t kMaxNameBytes = 1024;  // per text field
inline constexpr int kHelloTextFields = 7;
struct HelloFixed {
  uint32_t block_tokens;  // Namespace::block_tokens
  uint32_t tp_rank;
  uint32_t tp_size;
  uint8_t key_source;  // Namespace::key_source (0 tokens, 1 engine hash)
  uint8_t reserved0[3];
  // Requested ring and arena sizes; 0 = the daemon's default. The daemon may grant less.
  uint32_t sq_entries;
  uint32_t cq_entries;
  uint32_t arena_bytes;
  uint32_t reserved1;
};
static_assert(sizeof(HelloFixed) == 32);
static_assert(offsetof(HelloFixed, key_source) == 12);
static_assert(offsetof(HelloFixed, sq_entries) == 16);
static_assert(offsetof(HelloFixed, arena_bytes) == 24);

// Where things are in the client's region (a memfd the daemon creates, passed with Welcome).
// Offsets are from the start of the region, in bytes.
struct RegionLayout {
  uint64_t region_bytes;  // the memfd's size (a multiple of 4096)
  uint32_t sq_control;    // RingControl of the submission ring (client produces)
  uint32_t cq_control;    // RingControl of the completion ring (daemon produces)
  uint32_t sq_records;    // sq_entries RequestRecords
  uint32_t sq_entries;    // power of two
  uint32_t cq_records;    // cq_entries CompletionRecords
  uint32_t cq_entries;    // power of two
  uint32_t arena_offset;  // the argument/result arena
  uint32_t arena_bytes;   // multiple of 4096
};
static_assert(sizeof(RegionLayout) == 40);
static_assert(offsetof(RegionLayout, sq_control) == 8);
static_assert(offsetof(RegionLayout, arena_offset) == 32);

// File descriptors that come with Welcome, in this order.
enum WelcomeFd : int {
  kFdT1Segment = 0,   // T1 memfd: slot i is bytes [i * slot_bytes, (i + 1) * slot_bytes)
  kFdRegion = 1,      // the client's region (rings + arena), RegionLayout
  kFdDaemonBell = 2,  // eventfd the client writes to wake the daemon
  kFdClientBell = 3,  // eventfd the daemon writes to wake the client
  kWelcomeFdCount = 4,
};

struct WelcomePayload {
  uint64_t session_id;     // daemon-chosen, for logs
  uint64_t t1_bytes;       // size of the T1 segment
  uint32_t t1_slot_bytes;  // slot size of T1
  uint32_t t1_slots;       // slots in T1 (slot ids are < t1_slots)
  uint32_t max_batch;      // most keys in one request (kMaxBatchKeys)
  uint32_t reserved;       // 0
  RegionLayout layout;
};
static_assert(sizeof(WelcomePayload) == 72);
static_assert(offsetof(WelcomePayload, t1_slot_bytes) == 16);
static_assert(offsetof(WelcomePayload, max_batch) == 24);
static_assert(offsetof(WelcomePayload, layout) == 32);

// The daemon's GPU tier, right after WelcomePayload (since version 2). All zero when the daemon
// has no T0. Otherwise T0 is one device allocation of t0_bytes on the GPU named by pci_bus_id,
// cut into t0_slots slots of t0_slot_bytes: a client on the same GPU opens ipc_handle (CUDA/HIP
// IPC, gpu::OpenIpc) and finds slot i at opened_base + i * t0_slot_bytes. No fd comes with it.
inline constexpr size_t kPciBusIdBytes = 32;     // "0000:3b:00.0", NUL-terminated and -padded
inline constexpr size_t kT0IpcHandleBytes = 64;  // gpu::kIpcHandleBytes
struct WelcomeT0 {
  uint64_t t0_bytes;       // size of the T0 pool; 0 = no T0 (and every field below is 0)
  uint32_t t0_slot_bytes;  // slot size of T0
  uint32_t t0_slots;       // slots in T0 (T0 slot ids are < t0_slots)
  char pci_bus_id[kPciBusIdBytes];
  uint8_t ipc_handle[kT0IpcHandleBytes];  // opaque
};
static_assert(sizeof(WelcomeT0) == 112);
static_assert(offsetof(WelcomeT0, t0_slot_bytes) == 8);
static_assert(offsetof(WelcomeT0, t0_slots) == 12);
static_assert(offsetof(WelcomeT0, pci_bus_id) == 16);
static_assert(offsetof(WelcomeT0, ipc_handle) == 48);
// A Welcome payload is WelcomePayload then WelcomeT0, nothing else.
inline constexpr size_t kWelcomePayloadBytes = sizeof(WelcomePayload) + sizeof(WelcomeT0);
static_assert(kWelcomePayloadBytes == 184);

// Error payload: ErrorFixed, then message_bytes of UTF-8 text (<= kMaxErrorMessage).
inline constexpr uint32_t kMaxErrorMessage = 4096;
struct ErrorFixed {
  uint32_t code;  // absl::StatusCode value
  uint32_t message_bytes;
};
static_assert(sizeof(ErrorFixed) == 8);

// ---- data plane: rings -------------------------------------------------------------------------

inline constexpr size_t kCacheLine = 64;
inline constexpr uint32_t kRecordBytes = 64;
inline constexpr uint32_t kMinRingEntries = 2;
inline constexpr uint32_t kMaxRingEntries = 1u << 16;
inline constexpr uint32_t kArenaAlign = 8;  // arena offsets are multiples of this
inline constexpr uint32_t kMaxArenaBytes = 1u << 30;
inline constexpr uint32_t kMaxBatchKeys = 1024;

// One ring's control words: producer-written on one cache line, consumer-written on the next.
// Indices run freely (never wrap in practice); record i is at slot i % entries.
struct RingControl {
  alignas(kCacheLine) uint64_t head;  // next record the producer writes; producer stores
  uint32_t producer_sleeping;         // producer waits for space on its bell; producer stores
  uint32_t pad0;
  alignas(kCacheLine) uint64_t tail;  // next record the consumer reads; consumer stores
  uint32_t consumer_sleeping;         // consumer waits for records on its bell; consumer stores
  uint32_t pad1;
};
static_assert(sizeof(RingControl) == 128);
static_assert(offsetof(RingControl, tail) == 64);
static_assert(offsetof(RingControl, consumer_sleeping) == 72);

inline constexpr uint16_t kRequestMagic = 0x5152;     // "RQ"
inline constexpr uint16_t kCompletionMagic = 0x5143;  // "CQ"

enum class Op : uint8_t {
  kNop = 0,        // no arguments, no results: a round trip
  kLookup = 1,     // keys -> n and per-block TierMask
  kGet = 2,        // keys, tier -> per block a BlockResult (slot, bytes), leases held
  kPutBegin = 3,   // PutBeginArg -> per block a BlockResult (slot to fill / present / retry)
  kPutCommit = 4,  // PutCommitArg -> per block a BlockResult (committed / present)
  kPutAbort = 5,   // keys -> per block a BlockResult
  kRelease = 6,    // keys -> per block a BlockResult
  kDrop = 7,       // keys -> per block a BlockResult
  kStats = 8,      // no arguments -> StatsWire
  // Working slots (since version 3): unkeyed slots of T0 or T1 leased to the session, within its
  // quota, filled before the block's key is known, then published under a key or freed.
  kWorkTake = 9,      // no arguments; count slots of `tier` -> per slot a BlockResult
  kWorkPublish = 10,  // WorkPublishArg -> per slot a BlockResult (published + leased / present)
  kWorkFree = 11,     // WorkSlotArg -> per slot a BlockResult
};
inline constexpr uint8_t kMaxOp = 11;

// Tier numbers and masks are index/tier.h's: 0 T0, 1 T1, 2 T2, 3 T3 (the remote tier: lookup
// masks only; gets read from T0 or T1).
inline constexpr uint8_t kNumTiers = static_cast<uint8_t>(kvtier::kNumTiers);

struct RequestRecord {
  uint16_t magic;         // kRequestMagic
  uint8_t version;        // kProtocolVersion
  uint8_t op;             // Op
  uint16_t record_bytes;  // kRecordBytes
  uint16_t flags;         // 0
  uint64_t request_id;    // client-chosen, echoed in the completion
  uint32_t count;         // keys (blocks) in the request; 0 for kNop and kStats
  uint8_t tier;           // kGet: read from; kPutBegin, kWork*: the slots' tier (T0/T1); else 0
  uint8_t reserved0[3];
  uint32_t arg_offset;  // arena range of the arguments
  uint32_t arg_bytes;
  uint32_t result_offset;  // arena range the daemon writes results to
  uint32_t result_bytes;
  uint8_t reserved1[24];
};
static_assert(sizeof(RequestRecord) == kRecordBytes);
static_assert(offsetof(RequestRecord, op) == 3);
static_assert(offsetof(RequestRecord, flags) == 6);
static_assert(offsetof(RequestRecord, request_id) == 8);
static_assert(offsetof(RequestRecord, tier) == 20);
static_assert(offsetof(RequestRecord, result_bytes) == 36);
static_assert(offsetof(RequestRecord, arg_offset) == 24);
static_assert(offsetof(RequestRecord, reserved1) == 40);

// Outcome of a whole request.
enum class RequestStatus : uint16_t {
  kOk = 0,
  kInvalid = 1,      // malformed request (the daemon also closes the connection)
  kUnavailable = 2,  // daemon shutting down
  kInternal = 3,
};
inline constexpr uint16_t kMaxRequestStatus = 3;

struct CompletionRecord {
  uint16_t magic;          // kCompletionMagic
  uint8_t version;         // kProtocolVersion
  uint8_t op;              // the request's op
  uint16_t record_bytes;   // kRecordBytes
  uint16_t status;         // RequestStatus
  uint64_t request_id;     // the request's
  uint32_t count;          // kLookup: n (the prefix length); else the request's count
  uint32_t result_offset;  // the request's result range, echoed
  uint32_t result_bytes;   // bytes of results written (<= the request's result_bytes)
  uint8_t reserved[36];
};
static_assert(sizeof(CompletionRecord) == kRecordBytes);
static_assert(offsetof(CompletionRecord, status) == 6);
static_assert(offsetof(CompletionRecord, count) == 16);
static_assert(offsetof(CompletionRecord, result_bytes) == 24);
static_assert(offsetof(CompletionRecord, reserved) == 28);

// ---- data plane: arena arguments and results ---------------------------------------------------

// A block key: BlockKey{lo, hi} of index/block_key.h.
struct WireKey {
  uint64_t lo;
  uint64_t hi;
};
static_assert(sizeof(WireKey) == 16);

inline constexpr uint32_t kPutHasParent = 1;  // PutBeginArg::flags: `parent` is meaningful
struct PutBeginArg {
  WireKey key;
  WireKey parent;          // the block's prefix parent (meaningful with kPutHasParent)
  uint32_t payload_bytes;  // 1..slot_bytes
  uint32_t flags;          // kPutHasParent or 0
};
static_assert(sizeof(PutBeginArg) == 40);
static_assert(offsetof(PutBeginArg, payload_bytes) == 32);

struct PutCommitArg {
  WireKey key;
  uint64_t checksum;  // XXH3-64 of the payload_bytes written into the slot
};
static_assert(sizeof(PutCommitArg) == 24);

// kWorkPublish: the working slot `slot` of the record's tier becomes the cached block `key`.
struct WorkPublishArg {
  WireKey key;
  WireKey parent;          // meaningful with kPutHasParent
  uint64_t checksum;       // XXH3-64 of the payload_bytes in the slot (computed on the GPU for T0)
  uint32_t slot;           // a working slot of this session in the record's tier
  uint32_t payload_bytes;  // 1..slot_bytes of that tier
  uint32_t flags;          // kPutHasParent or 0
  uint32_t reserved;       // 0
};
static_assert(sizeof(WorkPublishArg) == 56);
static_assert(offsetof(WorkPublishArg, checksum) == 32);
static_assert(offsetof(WorkPublishArg, flags) == 48);

// kWorkFree: a working slot given back unpublished.
struct WorkSlotArg {
  uint32_t slot;
  uint32_t reserved;  // 0
};
static_assert(sizeof(WorkSlotArg) == 8);

// Per-block outcome, written by the daemon for kGet, kPutBegin, kPutCommit, kPutAbort, kRelease,
// kDrop. Retry and AlreadyPresent are normal outcomes, not errors.
enum class BlockCode : uint32_t {
  kOk = 0,              // get: leased, read slot; put_begin: leased, fill slot; others: done
  kAlreadyPresent = 1,  // put_begin / put_commit: the block is cached already; skip it
  kRetryLater = 2,      // put_begin: the tier is full now
  kMissing = 3,         // not in the cache (get, drop) or not leased by this client
  kLeased = 4,          // drop: leased by someone, not dropped
  kBadChecksum = 5,     // put_commit: payload does not match the checksum; discarded
  kFailed = 6,          // an I/O or internal failure for this block
  kOverQuota = 7,       // work_take: the session holds its quota of working slots (since v3)
};
inline constexpr uint32_t kMaxBlockCode = 7;

struct BlockResult {
  uint32_t code;           // BlockCode
  uint32_t slot;           // kOk: get/put_begin/work_take/work_publish: a slot of the tier; else 0
  uint32_t payload_bytes;  // kOk: get, publish: the payload; put_begin: as asked; take: slot bytes
  uint32_t reserved;       // 0
};
static_assert(sizeof(BlockResult) == 16);

// kStats result.
struct StatsWire {
  uint64_t lookups, lookup_keys, lookup_hit_blocks;
  uint64_t gets, get_blocks, promotions;
  uint64_t puts_begun, puts_committed, puts_aborted, puts_retry;
  uint64_t releases, drops;
  uint64_t t1_slots_total, t1_slots_free, leases_held, requests_invalid;
};
static_assert(sizeof(StatsWire) == 128);

}  // namespace kvtier::protocol
