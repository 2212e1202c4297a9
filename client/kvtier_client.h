// The kvtier C++ client: what an inference engine links to use a running kvtierd (DESIGN.md "Data
// flow"; docs/protocol.md is the wire format underneath).
//
//   auto client = Client::Connect({.socket_path = "/run/kvtier/kvtierd.sock", .ns = ns});
//   std::vector<BlockKey> keys = *(*client)->KeysFor(prompt_tokens);  // hashing happens here
//   size_t hit = (*client)->Lookup(keys)->hit_blocks;                 // longest cached prefix
//   (*client)->GetInto(first_hit_keys, destinations);                 // copies out of T1
//   (*client)->Put(new_keys, payloads, parent);                       // copies into T1, commits
//
// Keys. Every client hashes tokens the same way (index/block_key.h), chained from the root of the
// namespace it declares, one key per whole block of ns.block_tokens tokens (a partial last block
// is not cached). A namespace declaring key_source = engine_hash gets its keys from the engine's
// own block hashes instead (KeysForEngineHashes), folded under the namespace root the same way;
// each namespace takes one kind only, and asking it for the other is an error.
//
// Arguments. Every size and count is range-checked before anything is sent or copied (a payload
// of 0 bytes or above slot_bytes, more than max_batch items in one PutBegin/PutCommit):
// InvalidArgument naming the argument, nothing sent, and the connection stays usable.
//
// Data. The client maps the daemon's T1 segment and copies between its own buffers and T1 slots
// (host memory here; GpuClient (gpu_client.h) moves blocks between T1 or T0 and GPU memory). Put is
// two-phase: slots are reserved, filled, then committed with their XXH3 checksums, so nobody ever
// reads a half-written block. A block someone else stored first is skipped (kAlreadyPresent), so a
// prefix is stored once.
//
// Leases. Get leases blocks; their slots stay valid and unchanged until Release (GetInto
// releases by itself). When the client closes or its process dies, the daemon gives back every
// lease, every uncommitted put and every working slot.
//
// Working slots (protocol v3; docs/protocol.md "Working slots"). For KV computed before its block
// key is known (an engine decoding into a partly filled block): TakeWorkingSlots leases unkeyed
// slots of T0 or T1 to this session, within the quota the daemon's operator sets per session
// (daemon.max_working_slots; kOverQuota past it); the engine fills them (T1: MutableSlotData;
// T0: GpuClient::T0SlotData, device memory), then PublishWorking turns each into the cached block
// of its key, or FreeWorking gives it back. A published block stays leased to this client until
// Release(key), so it cannot move while the engine still attends to it in place.
//
// Errors: absl::Status. Unavailable when the daemon is unreachable or went away; the daemon's
// Error frame's code and text when it refused us; per-block outcomes are protocol::BlockCode.
//
// Thread-safety: every method may be called from any thread; requests are serialised on one
// connection (open several clients for parallelism).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "client/protocol/record_codec.h"
#include "common/status.h"
#include "index/block_index.h"
#include "index/namespace.h"

namespace kvtier::client {

struct ClientOptions {
  std::string socket_path;
  Namespace ns;
  std::string client_name;  // shows in the daemon's logs
  // Ring entries and arena bytes to ask for; 0 = the daemon's defaults.
  uint32_t sq_entries = 0;
  uint32_t cq_entries = 0;
  uint32_t arena_bytes = 0;
  int spin_us = 20;  // how long to poll for a completion before sleeping; >= 0
  // Map all of T1 at connect (MAP_POPULATE): costs ~0.1 s per GiB of 4 KiB pages once, and saves
  // a page fault per 4 KiB on first copies (puts ran at a tenth of memcpy speed without it).
  bool populate_t1 = true;
  // A request unanswered this long, or a connect whose handshake (connect, Hello, Welcome) has
  // not finished in this long (a daemon stopped but not gone): DeadlineExceeded. Above 0.
  int timeout_ms = 60 * 1000;
  // The daemon's memory pool to use (docs/protocol.md "Trust and isolation"); empty: the only one
  // this process's uid and groups may use. A pool it may not use is refused (PermissionDenied).
  std::string pool{};
};

// The daemon's GPU tier, as its Welcome describes it (wire_format.h WelcomeT0). A client on the
// same GPU (by PCI bus id) may open `ipc_handle` with gpu::OpenIpc; T0 slot i is then at
// opened_base + i * slot_bytes. Whoever maps T0 can read and write all of it, as with T1.
struct T0Info {
  uint64_t bytes = 0;
  uint32_t slot_bytes = 0;
  uint32_t slots = 0;
  std::string pci_bus_id;  // as gpu::DeviceInfo::pci_bus_id gives it
  std::array<uint8_t, protocol::kT0IpcHandleBytes> ipc_handle{};  // a gpu::IpcHandle's bytes
};

struct LookupResult {
  size_t hit_blocks = 0;        // the longest prefix of the keys cached in some tier
  std::vector<TierMask> tiers;  // tiers[i] for i < hit_blocks: where block i is
};

class Client {
 public:
  // Connects, says Hello, maps what Welcome hands over, all within options.timeout_ms. Errors
  // name the socket path; InvalidArgument for a bad namespace, timeout_ms or spin_us.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // One key per whole block of `tokens`, chained from the namespace root (or from `parent`, the
  // key of the block before tokens[0], to continue a sequence). FailedPrecondition when the
  // namespace declares key_source = engine_hash.
  absl::StatusOr<std::vector<BlockKey>> KeysFor(
      absl::Span<const uint32_t> tokens,
      const std::optional<BlockKey>& parent = std::nullopt) const;
  // One key per engine block hash (ChainEngineHash: key[i] = XXH3_128(key[i-1] ‖ hashes[i])),
  // chained from the namespace root or from `parent`, for engines that hash their own blocks.
  // FailedPrecondition unless the namespace declares key_source = engine_hash.
  absl::StatusOr<std::vector<BlockKey>> KeysForEngineHashes(
      absl::Span<const uint64_t> hashes,
      const std::optional<BlockKey>& parent = std::nullopt) const;

  absl::StatusOr<LookupResult> Lookup(absl::Span<const BlockKey> keys);
  // Lookup of many independent sequences at once (a scheduler step's waiting requests): one
  // result per sequence, the same as Lookup of each. The requests go out back to back, up to as
  // many as the rings and the arena hold, before the first answer is awaited, so the daemon serves
  // a window of them per wake-up and the round trip is paid once per window, not once per
  // sequence. A sequence longer than the daemon's max_batch is looked up alone afterwards.
  absl::StatusOr<std::vector<LookupResult>> LookupMany(
      absl::Span<const absl::Span<const BlockKey>> sequences);
  // Leases each block, promoting it into T1 as needed; one result per key (kOk: `slot` and
  // `payload_bytes` are valid until Release of that key).
  absl::StatusOr<std::vector<protocol::BlockResult>> Get(absl::Span<const BlockKey> keys);
  // The same from `tier`: Tier::kT1 is Get(keys); Tier::kT0 leases each block in T0 (the daemon
  // promotes into it as needed) and `slot` is a T0 slot (FailedPrecondition without a T0).
  absl::StatusOr<std::vector<protocol::BlockResult>> Get(absl::Span<const BlockKey> keys,
                                                         Tier tier);
  absl::StatusOr<std::vector<protocol::BlockResult>> Release(absl::Span<const BlockKey> keys);
  // Copies the leading run of blocks that Get found into `destinations` (each at least as large as
  // its block's payload), releases every lease it took, and returns how many were copied.
  absl::StatusOr<size_t> GetInto(absl::Span<const BlockKey> keys,
                                 absl::Span<const absl::Span<std::byte>> destinations);
  // put_begin, copy each payload into its slot, put_commit with checksums. One code per key:
  // kOk (stored), kAlreadyPresent, kRetryLater (T1 full now; nothing stored for that key), ...
  // `parent` is the key of the block before keys[0] (none when keys[0] starts a sequence).
  // InvalidArgument, before anything is sent, unless there is one payload per key and each is 1
  // to slot_bytes() bytes. A key given twice is written once, from its first payload; a later
  // occurrence gets kAlreadyPresent, or the first's code when the first was not stored.
  absl::StatusOr<std::vector<protocol::BlockCode>> Put(
      absl::Span<const BlockKey> keys, absl::Span<const absl::Span<const std::byte>> payloads,
      const std::optional<BlockKey>& parent = std::nullopt);
  // The two phases of Put, for engines that fill slots themselves (e.g. by DMA from the GPU):
  // PutBegin reserves a slot per item (kOk), MutableSlotData(slot) is where its payload goes, and
  // PutCommit publishes it with the payload's XXH3-64 (kBadChecksum: it did not match; discarded).
  // At most max_batch (1024) items per call, each payload_bytes 1 to slot_bytes(); otherwise
  // InvalidArgument and nothing is sent. No items: no results, nothing sent. A key repeated in
  // one PutBegin gets a slot once; its later occurrences get kAlreadyPresent and no slot.
  // `tier` is where the slots are: T1 (default), or T0 when the daemon has one (t0()), whose
  // slots are device memory the caller fills itself (GpuClient::T0SlotData); InvalidArgument naming
  // the tier otherwise. (Put copies from host memory, so it puts into T1 only.)
  absl::StatusOr<std::vector<protocol::BlockResult>> PutBegin(
      absl::Span<const protocol::PutBeginItem> items, Tier tier = Tier::kT1);
  absl::StatusOr<std::vector<protocol::BlockResult>> PutCommit(
      absl::Span<const protocol::PutCommitItem> items);
  std::byte* MutableSlotData(uint32_t slot);
  absl::StatusOr<std::vector<protocol::BlockResult>> Drop(absl::Span<const BlockKey> keys);

  // ---- working slots (top of this file) ----
  // Every call names the slots' tier: T0 (only when the daemon has one) or T1. Arguments are
  // checked before anything is sent (InvalidArgument naming the argument; the connection stays
  // usable): the tier, n or items.size() 1 to max_batch (1024; PublishWorking and FreeWorking
  // with no items return no results and send nothing), payload_bytes 1 to the tier's slot bytes.
  // Takes n working slots: one result per slot wanted. kOk: `slot` is a working slot of `tier`
  // leased to this session and payload_bytes its size; kRetryLater: the tier is full now;
  // kOverQuota: this session holds its quota of working slots.
  absl::StatusOr<std::vector<protocol::BlockResult>> TakeWorkingSlots(Tier tier, size_t n);
  // Publishes working slots of `tier` filled with items[i].payload_bytes bytes whose XXH3-64 is
  // items[i].checksum, each under its key and parent. One code per item. kOk: the slot is now the
  // cached block items[i].key (no longer a working slot), leased to this client until
  // Release(key). kAlreadyPresent: the key is cached in that tier already, and kBadChecksum (the
  // daemon verifies T1 puts): in both the slot stays this session's working slot. kMissing: not a
  // working slot of this session (also every repeat of a slot named earlier in the same call).
  // kRetryLater: the index is full now. kFailed.
  absl::StatusOr<std::vector<protocol::BlockCode>> PublishWorking(
      Tier tier, absl::Span<const protocol::WorkPublishItem> items);
  // Gives working slots of `tier` back unpublished: kOk, or kMissing (not a working slot of this
  // session, or a repeat of a slot named earlier in the same call).
  absl::StatusOr<std::vector<protocol::BlockCode>> FreeWorking(Tier tier,
                                                               absl::Span<const uint32_t> slots);

  absl::StatusOr<protocol::StatsWire> Stats();
  // A round trip that does nothing (for latency measurements).
  absl::Status Nop();

  // The bytes of T1 slot `slot`, valid while this client lives (for zero-copy readers); nullptr
  // for a slot that T1 does not have. MutableSlotData likewise (a T1 put_begin slot or working
  // slot is filled there; T0 slots are device memory: GpuClient::T0SlotData).
  const std::byte* SlotData(uint32_t slot) const;
  uint32_t slot_bytes() const;
  // This process's mapping of the whole T1 segment (for registering it with a GPU runtime).
  std::byte* t1_base() const;
  uint64_t t1_bytes() const;
  uint64_t session_id() const;
  // The daemon's T0, or nullopt when it has none.
  std::optional<T0Info> t0() const;

  class Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  // OK when a payload of `bytes` fits a slot of `tier` (1 to its slot bytes); else
  // InvalidArgument naming what[index]field.
  absl::Status CheckPayloadBytes(const char* what, size_t index, const char* field, uint64_t bytes,
                                 Tier tier = Tier::kT1) const;
  // OK when `what` may name slots of `tier`: T1, or T0 when the daemon has one; else
  // InvalidArgument naming the tier.
  absl::Status CheckSlotTier(const char* what, Tier tier) const;
  // OK when `count` items fit one request (1 to max_batch); else InvalidArgument naming `what`.
  absl::Status CheckBatch(const char* what, size_t count) const;
  // One put_begin + copies + put_commit of at most max_batch items, holding the connection
  // throughout (its commits are pipelined).
  absl::Status PutChunk(absl::Span<const protocol::PutBeginItem> items,
                        absl::Span<const absl::Span<const std::byte>> payloads,
                        absl::Span<protocol::BlockCode> codes);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::client
