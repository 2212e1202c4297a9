// GPU transfers for engines: get blocks from kvtier straight into an engine's paged KV cache, and
// put them from it, on the engine's own stream (DESIGN.md "Data flow"; kernels/kv_copy.h moves the
// bytes, kernels/kv_layout.h describes the cache).
//
//   auto gpu = GpuClient::Create(client.get(), {.device = 0});
//   auto t = (*gpu)->GetIntoCache(keys, cache, engine_blocks, stream);   // enqueued, not waited
//   ... launch attention on `stream`: it sees the blocks (same-stream order) ...
//   t->Wait();                                    // leases go back once the copies have landed
//
// Ordering, the part other systems get wrong (garbled KV from a missing sync):
// - Get: copies are enqueued on `stream` after everything the engine enqueued there before, and
//   the engine's later work on `stream` runs after them. Work on another stream must first wait
//   on transfer.event() (gpu::StreamWaitEvent). The leases, and so the T1 slots, are held until
//   the copies have landed: Wait() (or the transfer's destructor) checks the event first.
// - Put: copies read the cache after the engine's earlier work on `stream`. The engine may
//   overwrite those cache blocks with later work on `stream` at once; from another stream, only
//   after transfer.event(). Each payload's XXH3-64 is computed on the GPU from the cache blocks in
//   place (kernels/gpu_checksum.h), so no CPU core reads the bytes: on the client's own side
//   stream, beside the copies (it forks from `stream` where the put is enqueued, and `stream`
//   joins it after the copies, so the ordering above holds for the hash's reads too).
//   Wait() blocks until the copies landed, then commits the blocks with those checksums: only then
//   can other clients see them (never half-written). The cache's rows, strides and bases must be
//   8-byte aligned (every real layout is; InvalidArgument otherwise).
//
// T1 is reached by DMA (or by the kernel through mapped memory): Create registers this process's
// mapping of T1 with the GPU runtime (about 0.04 s per GiB on an H100 host).
//
// T0. When the daemon keeps a T0 on this client's GPU (Client::t0()'s PCI bus id names
// options.device), Create opens T0's IPC handle (gpu::OpenIpc; closed by the destructor), and gets
// may copy device-to-device from T0 slots instead of host-to-device from T1, as t0_reads says:
//   - kWhenPresent (default): a Lookup first; blocks that are in T0 are leased from T0 (a tier-0
//     get), the rest from T1 as without T0. Costs one more round trip; saves the PCIe copy of
//     every block already on the GPU.
//   - kAlways: every block is leased from T0; the daemon promotes T1 -> T0 (and T2 -> T1 -> T0)
//     first, so later gets find the blocks on the GPU.
//   - kNever: T1 only.
// A block that T0 cannot take now (full of leased blocks: RetryLater) is read from T1 instead.
// Either way only the leading run of hits is copied, one GpuTransfer covers both tiers and its
// Wait releases every lease. Without a T0 on this GPU (none, another GPU, or the handle did not
// open: logged) every mode reads T1. Whoever maps T0 can read and write all of it, as with T1.
//
// Thread-safety: one thread at a time per GpuClient (it owns one KvCopier); the Client it wraps may
// be shared. A GpuTransfer must be waited or destroyed before its GpuClient.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/kvtier_client.h"
#include "kernels/gpu_checksum.h"
#include "kernels/gpu_runtime.h"
#include "kernels/kv_copy.h"
#include "kernels/kv_layout.h"

namespace kvtier::client {

class GpuClient;

// A get or put whose copies are in flight on the engine's stream.
class GpuTransfer {
 public:
  GpuTransfer(GpuTransfer&&) noexcept;
  GpuTransfer& operator=(GpuTransfer&&) noexcept;
  // Waits for the copies (and commits a put) if Wait was not called; errors are logged.
  ~GpuTransfer();

  // Blocks until the copies have landed; a get then releases its leases, a put checksums and
  // commits its blocks. One code per key given: get — kOk copied, else why not (only the leading
  // run of hits is copied); put — kOk stored, kAlreadyPresent, kRetryLater, kBadChecksum, ...
  // Second and later calls return the first result.
  absl::StatusOr<std::vector<protocol::BlockCode>> Wait();
  // Recorded on the engine's stream after the copies.
  gpu::EventHandle event() const { return event_.handle(); }
  // Blocks whose copies were enqueued, and how many of those come from T0.
  size_t copied_blocks() const { return copied_; }
  size_t t0_blocks() const { return t0_copied_; }

 private:
  friend class GpuClient;
  enum class Kind { kGet, kPut };
  GpuTransfer(GpuClient* owner, Kind kind, gpu::Event event);
  absl::Status Finish();

  // A put's blocks [begin, end) of keys_, whose copies (and checksums) end with `event`.
  struct Chunk {
    size_t begin = 0, end = 0;
    gpu::Event event;
  };
  absl::Status FinishPut();

  GpuClient* owner_ = nullptr;
  Kind kind_ = Kind::kGet;
  gpu::Event event_;
  gpu::Event hashed_;                       // a put's checksums landed in sums_ (side stream)
  std::vector<Chunk> chunks_;               // a put's, in copy order
  std::vector<BlockKey> keys_;              // copied blocks' keys (leased or being put)
  std::vector<uint32_t> slots_;             // their T1 slots
  std::vector<protocol::BlockCode> codes_;  // one per key given
  std::vector<size_t> copied_index_;        // codes_ index of each copied block
  uint64_t* sums_ = nullptr;                // a put's checksums (pinned; the owner's pool)
  uint32_t payload_bytes_ = 0;
  size_t copied_ = 0;
  size_t t0_copied_ = 0;
  bool finished_ = false;
  absl::Status finish_status_;
};

// Where GetIntoCache reads blocks from when the daemon has a T0 on this GPU (gpu_client.h top).
enum class T0Reads { kNever = 0, kWhenPresent = 1, kAlways = 2 };

// The automatic path takes DMA only for contiguous pieces of at least this many bytes.
inline constexpr uint64_t kMinDmaPieceBytes = 64 << 10;

struct GpuClientOptions {
  int device = 0;  // the engine's GPU (its cache and streams live there)
  T0Reads t0_reads = T0Reads::kWhenPresent;
  // A put's copies are cut into up to this many chunks, each committed as soon as its copies
  // land (so commits overlap the DMA of later chunks).
  int commit_chunks = 8;  // below 1 means 1
  // kDma for caches whose (block, layer, K|V) pieces are contiguous and at least
  // kMinDmaPieceBytes, else kKernel; set to force one.
  std::optional<KvCopyPath> path;
};

class GpuClient {
 public:
  // `client` must outlive this object. FailedPrecondition in the CPU-only variant.
  static absl::StatusOr<std::unique_ptr<GpuClient>> Create(Client* client,
                                                           const GpuClientOptions& options);
  ~GpuClient();

  // Leases keys (promoting into T1 as needed) and enqueues copies of the leading run of hits into
  // engine blocks engine_blocks[0..hits) on `stream`. keys.size() == engine_blocks.size().
  absl::StatusOr<GpuTransfer> GetIntoCache(absl::Span<const BlockKey> keys,
                                           const PagedKvCache& cache,
                                           absl::Span<const int32_t> engine_blocks,
                                           gpu::StreamHandle stream);
  // Reserves T1 slots for keys not cached yet and enqueues copies of their engine blocks into them
  // on `stream`; Wait() commits. `parent` is the key of the block before keys[0].
  absl::StatusOr<GpuTransfer> PutFromCache(absl::Span<const BlockKey> keys,
                                           const PagedKvCache& cache,
                                           absl::Span<const int32_t> engine_blocks,
                                           gpu::StreamHandle stream,
                                           const std::optional<BlockKey>& parent = std::nullopt);

  Client* client() const { return client_; }
  // True when T0 is mapped here (the daemon has one on this GPU and its handle opened).
  bool t0_mapped() const { return t0_device_ != nullptr; }
  // Device address of T0 slot `slot` in this process's mapping of T0, slot_bytes
  // (Client::t0()->slot_bytes) long: where an engine fills a T0 working slot or tier-0 put_begin
  // slot, hashes it (GpuChecksummer::Payloads), or attends to a leased T0 block in place. Valid
  // while this GpuClient lives; nullptr when T0 is not mapped here or has no such slot.
  std::byte* T0SlotData(uint32_t slot) const;
  // Device address of T1 slot `slot` through this process's registered mapping of T1 (a copy
  // engine or kernel reaches T1 there); nullptr for a slot T1 does not have.
  std::byte* T1SlotDeviceData(uint32_t slot) const;
  // For gets from now on.
  void set_t0_reads(T0Reads mode) { t0_reads_ = mode; }
  T0Reads t0_reads() const { return t0_reads_; }

 private:
  friend class GpuTransfer;
  GpuClient(Client* client, const GpuClientOptions& options);
  absl::Status Init();
  absl::Status OpenT0();
  // Leases keys from T0 and/or T1 as t0_reads_ says: one result per key, and per key whether
  // its slot is a T0 slot. On error no lease is left held.
  struct Leased {
    std::vector<protocol::BlockResult> got;
    std::vector<bool> from_t0;
  };
  void ReleaseLeased(absl::Span<const BlockKey> keys,
                     const std::vector<protocol::BlockResult>& got);
  absl::StatusOr<Leased> Lease(absl::Span<const BlockKey> keys);
  absl::StatusOr<Leased> LeaseWherePresent(absl::Span<const BlockKey> keys);
  KvCopyPath PathFor(const PagedKvCache& cache) const;
  std::vector<void*> PayloadPointers(absl::Span<const uint32_t> slots) const;
  absl::Status EnqueuePayloads(const PagedKvCache& cache, KvCopyDirection direction,
                               absl::Span<const int32_t> engine_blocks,
                               const std::vector<void*>& payloads, gpu::StreamHandle stream);
  // A put's copies, cut into chunks that each end with an event (GpuTransfer::Chunk).
  absl::Status EnqueueChunks(const PagedKvCache& cache, absl::Span<const int32_t> blocks,
                             gpu::StreamHandle stream, GpuTransfer* t);
  absl::Status Enqueue(const PagedKvCache& cache, KvCopyDirection direction,
                       absl::Span<const int32_t> engine_blocks, absl::Span<const uint32_t> slots,
                       gpu::StreamHandle stream);

  // Pinned (mapped) buffers for puts' checksums, reused: freeing pinned memory synchronises the
  // device, so a put never allocates one on its path once the pool has grown.
  absl::StatusOr<uint64_t*> AcquireSums(size_t n) ABSL_LOCKS_EXCLUDED(sums_mu_);
  void ReleaseSums(uint64_t* sums) ABSL_LOCKS_EXCLUDED(sums_mu_);

  Client* const client_;
  const GpuClientOptions options_;
  std::unique_ptr<KvCopier> copier_;
  std::unique_ptr<GpuChecksummer> checksummer_;
  gpu::Stream hash_stream_;  // puts' checksums, beside their copies on the engine's stream
  gpu::Event fork_;          // where a put's hash forks from the engine's stream
  absl::Mutex sums_mu_;
  // (buffer, capacity in sums)
  std::vector<std::pair<uint64_t*, size_t>> free_sums_ ABSL_GUARDED_BY(sums_mu_);
  // Every buffer, freed by ~GpuClient.
  std::vector<std::pair<uint64_t*, size_t>> all_sums_ ABSL_GUARDED_BY(sums_mu_);
  std::byte* t1_device_ = nullptr;      // device-side address of this process's T1 mapping
  std::vector<std::byte*> registered_;  // chunk starts registered with the runtime
  std::byte* t0_device_ = nullptr;      // this process's mapping of T0 (OpenIpc), or null
  uint32_t t0_slot_bytes_ = 0;
  uint32_t t0_slots_ = 0;
  T0Reads t0_reads_;
};

}  // namespace kvtier::client
