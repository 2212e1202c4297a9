#include "client/gpu_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace kvtier::client {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;

constexpr uint64_t kRegisterChunk = uint64_t{1} << 30;  // as T1 does: long calls hold a driver lock
constexpr size_t kMaxBatch = 1024;                      // the protocol's items per request

BlockCode CodeOf(const BlockResult& r) { return static_cast<BlockCode>(r.code); }

// Also that one block's payload fits a T1 slot: a larger one would overrun its slot into other
// blocks (and is cut to 32 bits nowhere: it is refused here, before anything is copied).
absl::Status CheckShapes(size_t keys, size_t blocks, const PagedKvCache& cache,
                         uint32_t slot_bytes) {
  if (keys != blocks) {
    return absl::InvalidArgumentError(
        fmt::format("{} keys but {} engine blocks: one engine block per key", keys, blocks));
  }
  if (keys > kMaxBatch) {
    return absl::InvalidArgumentError(
        fmt::format("{} keys in one GPU transfer; at most {}", keys, kMaxBatch));
  }
  KVTIER_RETURN_IF_ERROR(ValidatePagedKvCache(cache));
  if (cache.payload_bytes() > slot_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("cache: one block's payload is {} bytes, above kvtierd's slot_bytes {}",
                    cache.payload_bytes(), slot_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

// ---- GpuClient ----

GpuClient::GpuClient(Client* client, const GpuClientOptions& options)
    : client_(client), options_(options), t0_reads_(options.t0_reads) {}

absl::StatusOr<std::unique_ptr<GpuClient>> GpuClient::Create(Client* client,
                                                             const GpuClientOptions& options) {
  std::unique_ptr<GpuClient> g(new GpuClient(client, options));
  KVTIER_RETURN_IF_ERROR(g->Init());
  return g;
}

absl::Status GpuClient::Init() {
  KVTIER_RETURN_IF_ERROR(gpu::SetDevice(options_.device));
  KVTIER_ASSIGN_OR_RETURN(copier_, KvCopier::Create());
  KVTIER_ASSIGN_OR_RETURN(checksummer_, GpuChecksummer::Create());
  KVTIER_ASSIGN_OR_RETURN(hash_stream_, gpu::Stream::Create());
  KVTIER_ASSIGN_OR_RETURN(fork_, gpu::Event::Create());
  // A first put allocates no pinned memory on its path (that takes longer than its commit).
  KVTIER_ASSIGN_OR_RETURN(uint64_t * sums, AcquireSums(kMaxBatch));
  ReleaseSums(sums);
  std::byte* base = client_->t1_base();
  const uint64_t bytes = client_->t1_bytes();
  for (uint64_t off = 0; off < bytes; off += kRegisterChunk) {
    const absl::Status st = gpu::HostRegister(base + off, std::min(kRegisterChunk, bytes - off));
    if (!st.ok()) {
      return absl::Status(st.code(), fmt::format("registering T1 for the GPU at offset {}: {}", off,
                                                 std::string(st.message())));
    }
    registered_.push_back(base + off);
  }
  KVTIER_ASSIGN_OR_RETURN(void* dev, gpu::DevicePointerOf(base));
  t1_device_ = static_cast<std::byte*>(dev);
  return OpenT0();
}

// T0 is an optimisation: when it is elsewhere or its handle does not open, gets read T1 (said in
// the log); only a runtime failure to answer which device has T0's bus id is an error.
absl::Status GpuClient::OpenT0() {
  const std::optional<T0Info> t0 = client_->t0();
  if (!t0) return absl::OkStatus();
  absl::StatusOr<int> device = gpu::DeviceByPciBusId(t0->pci_bus_id);
  if (!device.ok() && device.status().code() != absl::StatusCode::kNotFound) {
    return device.status();
  }
  if (!device.ok() || *device != options_.device) {
    KVTIER_LOG(kInfo, "client", "kvtierd's T0 is on GPU {}, not on GPU {}: reading T1 only",
               t0->pci_bus_id, options_.device);
    return absl::OkStatus();
  }
  static_assert(gpu::kIpcHandleBytes == protocol::kT0IpcHandleBytes);
  gpu::IpcHandle handle;
  handle.bytes = t0->ipc_handle;
  absl::StatusOr<void*> opened = gpu::OpenIpc(handle);  // options_.device is current (Init)
  if (!opened.ok()) {
    KVTIER_LOG(kWarn, "client", "cannot open kvtierd's T0 on GPU {} ({}): reading T1 only: {}",
               options_.device, t0->pci_bus_id, std::string(opened.status().message()));
    return absl::OkStatus();
  }
  t0_device_ = static_cast<std::byte*>(*opened);
  t0_slot_bytes_ = t0->slot_bytes;
  t0_slots_ = t0->slots;
  return absl::OkStatus();
}

std::byte* GpuClient::T0SlotData(uint32_t slot) const {
  if (t0_device_ == nullptr || slot >= t0_slots_) return nullptr;
  return t0_device_ + uint64_t{slot} * t0_slot_bytes_;
}

std::byte* GpuClient::T1SlotDeviceData(uint32_t slot) const {
  if (client_->SlotData(slot) == nullptr) return nullptr;  // not a slot of T1
  return t1_device_ + uint64_t{slot} * client_->slot_bytes();
}

GpuClient::~GpuClient() {
  for (const auto& [p, capacity] : all_sums_) (void)gpu::PinnedFree(p);
  if (t0_device_ != nullptr) (void)gpu::CloseIpc(t0_device_);
  for (std::byte* p : registered_) (void)gpu::HostUnregister(p);
}

absl::StatusOr<uint64_t*> GpuClient::AcquireSums(size_t n) {
  absl::MutexLock lock(&sums_mu_);
  for (size_t i = 0; i < free_sums_.size(); ++i) {
    if (free_sums_[i].second >= n) {
      uint64_t* p = free_sums_[i].first;
      free_sums_.erase(free_sums_.begin() + static_cast<ptrdiff_t>(i));
      return p;
    }
  }
  const size_t capacity = std::max<size_t>(n, kMaxBatch);
  KVTIER_ASSIGN_OR_RETURN(void* p, gpu::PinnedAlloc(capacity * sizeof(uint64_t)));
  all_sums_.push_back({static_cast<uint64_t*>(p), capacity});
  return static_cast<uint64_t*>(p);
}

void GpuClient::ReleaseSums(uint64_t* sums) {
  absl::MutexLock lock(&sums_mu_);
  for (const auto& entry : all_sums_) {
    if (entry.first == sums) free_sums_.push_back(entry);
  }
}

KvCopyPath GpuClient::PathFor(const PagedKvCache& cache) const {
  if (options_.path) return *options_.path;
  // Batched DMA of pieces under 64 KiB ran at 40-98% of line rate from one H100 run to the next,
  // the kernel at a steady 92-95% (docs/benchmarks.md "GPU transfers"); from 64 KiB DMA holds
  // 96-97% and takes no SMs from the model.
  return cache.pieces_contiguous() && cache.piece_bytes() >= kMinDmaPieceBytes
             ? KvCopyPath::kDma
             : KvCopyPath::kKernel;
}

std::vector<void*> GpuClient::PayloadPointers(absl::Span<const uint32_t> slots) const {
  std::vector<void*> out;
  out.reserve(slots.size());
  for (uint32_t s : slots) out.push_back(t1_device_ + uint64_t{s} * client_->slot_bytes());
  return out;
}

absl::Status GpuClient::Enqueue(const PagedKvCache& cache, KvCopyDirection direction,
                                absl::Span<const int32_t> engine_blocks,
                                absl::Span<const uint32_t> slots, gpu::StreamHandle stream) {
  return EnqueuePayloads(cache, direction, engine_blocks, PayloadPointers(slots), stream);
}

// Payloads may be in T1 (mapped host memory) and T0 (device memory) at once: both the DMA path
// and the kernel take any device-visible address.
absl::Status GpuClient::EnqueuePayloads(const PagedKvCache& cache, KvCopyDirection direction,
                                        absl::Span<const int32_t> engine_blocks,
                                        const std::vector<void*>& payloads,
                                        gpu::StreamHandle stream) {
  if (payloads.empty()) return absl::OkStatus();
  return copier_->Copy(
      cache, direction, std::span<const int32_t>(engine_blocks.data(), engine_blocks.size()),
      std::span<void* const>(payloads.data(), payloads.size()), PathFor(cache), stream);
}

// On an error path: gives back the leases `got` holds (results[i] for keys[i]; may be shorter).
void GpuClient::ReleaseLeased(absl::Span<const BlockKey> keys,
                              const std::vector<BlockResult>& got) {
  std::vector<BlockKey> leased;
  for (size_t i = 0; i < got.size(); ++i) {
    if (CodeOf(got[i]) == BlockCode::kOk) leased.push_back(keys[i]);
  }
  if (!leased.empty()) (void)client_->Release(leased);
}

absl::StatusOr<GpuClient::Leased> GpuClient::Lease(absl::Span<const BlockKey> keys) {
  const T0Reads mode = t0_device_ == nullptr ? T0Reads::kNever : t0_reads_;
  Leased out;
  if (mode == T0Reads::kWhenPresent) {
    KVTIER_ASSIGN_OR_RETURN(out, LeaseWherePresent(keys));
  } else {
    out.from_t0.assign(keys.size(), mode == T0Reads::kAlways);
    KVTIER_ASSIGN_OR_RETURN(out.got,
                            client_->Get(keys, mode == T0Reads::kAlways ? Tier::kT0 : Tier::kT1));
  }
  // T0 full of leased blocks answers RetryLater: such a block is still a hit, read from T1.
  std::vector<BlockKey> retry;
  std::vector<size_t> at;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (out.from_t0[i] && CodeOf(out.got[i]) == BlockCode::kRetryLater) {
      retry.push_back(keys[i]);
      at.push_back(i);
    }
  }
  if (retry.empty()) return out;
  absl::StatusOr<std::vector<BlockResult>> again = client_->Get(retry, Tier::kT1);
  if (!again.ok()) {
    ReleaseLeased(keys, out.got);
    return again.status();
  }
  for (size_t j = 0; j < at.size(); ++j) {
    out.got[at[j]] = (*again)[j];
    out.from_t0[at[j]] = false;
  }
  return out;
}

absl::StatusOr<GpuClient::Leased> GpuClient::LeaseWherePresent(absl::Span<const BlockKey> keys) {
  KVTIER_ASSIGN_OR_RETURN(LookupResult where, client_->Lookup(keys));
  Leased out;
  out.from_t0.resize(keys.size());
  std::vector<BlockKey> group[2];  // [0] from T1, [1] from T0
  for (size_t i = 0; i < keys.size(); ++i) {
    out.from_t0[i] = i < where.hit_blocks && (where.tiers[i] & TierBit(Tier::kT0)) != 0;
    group[out.from_t0[i]].push_back(keys[i]);
  }
  std::vector<BlockResult> got[2];
  for (int g : {1, 0}) {
    if (group[g].empty()) continue;
    absl::StatusOr<std::vector<BlockResult>> r = client_->Get(group[g], g ? Tier::kT0 : Tier::kT1);
    if (!r.ok()) {
      ReleaseLeased(group[1], got[1]);  // the T0 group's, when the T1 get failed
      return r.status();
    }
    got[g] = std::move(*r);
  }
  size_t next[2] = {0, 0};
  out.got.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const int g = out.from_t0[i];
    out.got.push_back(got[g][next[g]++]);
  }
  return out;
}

absl::StatusOr<GpuTransfer> GpuClient::GetIntoCache(absl::Span<const BlockKey> keys,
                                                    const PagedKvCache& cache,
                                                    absl::Span<const int32_t> engine_blocks,
                                                    gpu::StreamHandle stream) {
  KVTIER_RETURN_IF_ERROR(
      CheckShapes(keys.size(), engine_blocks.size(), cache, client_->slot_bytes()));
  KVTIER_ASSIGN_OR_RETURN(gpu::Event event, gpu::Event::Create());
  KVTIER_ASSIGN_OR_RETURN(Leased leased, Lease(keys));
  const std::vector<BlockResult>& got = leased.got;
  GpuTransfer t(this, GpuTransfer::Kind::kGet, std::move(event));
  t.codes_.assign(keys.size(), BlockCode::kMissing);
  t.payload_bytes_ = static_cast<uint32_t>(cache.payload_bytes());  // <= slot_bytes: CheckShapes
  size_t hits = 0;
  while (hits < got.size() && CodeOf(got[hits]) == BlockCode::kOk &&
         got[hits].payload_bytes == cache.payload_bytes()) {
    ++hits;
  }
  std::vector<BlockKey> unused;
  std::vector<void*> payloads;
  for (size_t i = 0; i < got.size(); ++i) {
    if (i < hits) {
      t.keys_.push_back(keys[i]);
      t.slots_.push_back(got[i].slot);
      t.copied_index_.push_back(i);
      const uint64_t slot = got[i].slot;
      payloads.push_back(leased.from_t0[i] ? t0_device_ + slot * t0_slot_bytes_
                                           : t1_device_ + slot * client_->slot_bytes());
      t.t0_copied_ += leased.from_t0[i] ? 1u : 0u;
    } else {
      t.codes_[i] = CodeOf(got[i]) == BlockCode::kOk ? BlockCode::kMissing : CodeOf(got[i]);
      if (CodeOf(got[i]) == BlockCode::kOk) unused.push_back(keys[i]);  // past the first miss
    }
  }
  if (!unused.empty()) KVTIER_RETURN_IF_ERROR(client_->Release(unused).status());
  absl::Status st = EnqueuePayloads(cache, KvCopyDirection::kPayloadToCache,
                                    engine_blocks.subspan(0, hits), payloads, stream);
  if (st.ok()) st = t.event_.Record(stream);
  if (!st.ok()) {
    (void)client_->Release(t.keys_);
    t.finished_ = true;
    return st;
  }
  t.copied_ = hits;
  return t;
}

absl::StatusOr<GpuTransfer> GpuClient::PutFromCache(absl::Span<const BlockKey> keys,
                                                    const PagedKvCache& cache,
                                                    absl::Span<const int32_t> engine_blocks,
                                                    gpu::StreamHandle stream,
                                                    const std::optional<BlockKey>& parent) {
  KVTIER_RETURN_IF_ERROR(
      CheckShapes(keys.size(), engine_blocks.size(), cache, client_->slot_bytes()));
  KVTIER_RETURN_IF_ERROR(CheckChecksumLayout(cache));  // before any slot is reserved
  KVTIER_ASSIGN_OR_RETURN(gpu::Event event, gpu::Event::Create());
  std::vector<protocol::PutBeginItem> items(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    items[i].key = keys[i];
    items[i].parent = i == 0 ? parent : std::optional<BlockKey>(keys[i - 1]);
    items[i].payload_bytes = static_cast<uint32_t>(cache.payload_bytes());  // <= slot_bytes
  }
  KVTIER_ASSIGN_OR_RETURN(std::vector<BlockResult> begun, client_->PutBegin(items));
  GpuTransfer t(this, GpuTransfer::Kind::kPut, std::move(event));
  t.codes_.resize(keys.size());
  t.payload_bytes_ = static_cast<uint32_t>(cache.payload_bytes());  // <= slot_bytes: CheckShapes
  std::vector<int32_t> blocks;
  for (size_t i = 0; i < begun.size(); ++i) {
    t.codes_[i] = CodeOf(begun[i]);
    if (t.codes_[i] != BlockCode::kOk) continue;
    t.keys_.push_back(keys[i]);
    t.slots_.push_back(begun[i].slot);
    t.copied_index_.push_back(i);
    blocks.push_back(engine_blocks[i]);
  }
  absl::Status st = EnqueueChunks(cache, blocks, stream, &t);
  if (st.ok()) st = t.event_.Record(stream);
  if (!st.ok()) {
    // Nothing is published. The reserved slots stay with this connection until it closes (the
    // protocol has no abort of one open put yet).
    t.finished_ = true;
    return st;
  }
  t.copied_ = t.keys_.size();
  return t;
}

absl::Status GpuClient::EnqueueChunks(const PagedKvCache& cache, absl::Span<const int32_t> blocks,
                                      gpu::StreamHandle stream, GpuTransfer* t) {
  const size_t n = blocks.size();
  if (n == 0) return absl::OkStatus();
  // The checksums, from the cache in place, on the side stream: ordered after the engine's
  // writes on `stream` (the fork), running beside the copies; `stream` joins it after them.
  KVTIER_ASSIGN_OR_RETURN(t->sums_, AcquireSums(n));
  KVTIER_ASSIGN_OR_RETURN(void* sums_device, gpu::DevicePointerOf(t->sums_));
  KVTIER_ASSIGN_OR_RETURN(t->hashed_, gpu::Event::Create());
  KVTIER_RETURN_IF_ERROR(fork_.Record(stream));
  KVTIER_RETURN_IF_ERROR(gpu::StreamWaitEvent(hash_stream_.handle(), fork_));
  KVTIER_RETURN_IF_ERROR(
      checksummer_->CacheBlocks(cache, std::span<const int32_t>(blocks.data(), n),
                                static_cast<uint64_t*>(sums_device), hash_stream_.handle()));
  KVTIER_RETURN_IF_ERROR(t->hashed_.Record(hash_stream_.handle()));
  // Then the copies, one chunk at a time, each marked by its own event.
  const auto wanted = static_cast<size_t>(std::max(options_.commit_chunks, 1));
  const size_t chunks = std::min(wanted, n);
  for (size_t c = 0; c < chunks; ++c) {
    GpuTransfer::Chunk chunk;
    chunk.begin = n * c / chunks;
    chunk.end = n * (c + 1) / chunks;
    KVTIER_ASSIGN_OR_RETURN(chunk.event, gpu::Event::Create());
    const size_t len = chunk.end - chunk.begin;
    KVTIER_RETURN_IF_ERROR(
        Enqueue(cache, KvCopyDirection::kCacheToPayload, blocks.subspan(chunk.begin, len),
                absl::MakeConstSpan(t->slots_).subspan(chunk.begin, len), stream));
    KVTIER_RETURN_IF_ERROR(chunk.event.Record(stream));
    t->chunks_.push_back(std::move(chunk));
  }
  // The engine's later work on `stream` (which may overwrite the blocks) waits for the hash too.
  return gpu::StreamWaitEvent(stream, t->hashed_);
}

// ---- GpuTransfer ----

GpuTransfer::GpuTransfer(GpuClient* owner, Kind kind, gpu::Event event)
    : owner_(owner), kind_(kind), event_(std::move(event)) {}

GpuTransfer::GpuTransfer(GpuTransfer&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)),
      kind_(o.kind_),
      event_(std::move(o.event_)),
      hashed_(std::move(o.hashed_)),
      chunks_(std::move(o.chunks_)),
      keys_(std::move(o.keys_)),
      slots_(std::move(o.slots_)),
      codes_(std::move(o.codes_)),
      copied_index_(std::move(o.copied_index_)),
      sums_(std::exchange(o.sums_, nullptr)),
      payload_bytes_(o.payload_bytes_),
      copied_(o.copied_),
      t0_copied_(o.t0_copied_),
      finished_(std::exchange(o.finished_, true)),
      finish_status_(std::move(o.finish_status_)) {}

GpuTransfer& GpuTransfer::operator=(GpuTransfer&& o) noexcept {
  if (this != &o) {
    this->~GpuTransfer();
    new (this) GpuTransfer(std::move(o));
  }
  return *this;
}

GpuTransfer::~GpuTransfer() {
  if (owner_ == nullptr || finished_) return;
  const absl::Status st = Finish();
  if (!st.ok()) KVTIER_LOG(kWarn, "client", "GPU transfer finished with: {}", st.ToString());
}

absl::StatusOr<std::vector<protocol::BlockCode>> GpuTransfer::Wait() {
  if (!finished_) finish_status_ = Finish();
  if (!finish_status_.ok()) return finish_status_;
  return codes_;
}

absl::Status GpuTransfer::Finish() {
  finished_ = true;
  Client* client = owner_->client();
  const absl::Status synced = kind_ == Kind::kGet ? event_.Synchronize() : absl::OkStatus();
  if (kind_ == Kind::kGet) {
    // Even when the GPU reported an error, the slots are no longer read: give the leases back.
    const absl::Status released =
        keys_.empty() ? absl::OkStatus() : client->Release(keys_).status();
    KVTIER_RETURN_IF_ERROR(synced);
    KVTIER_RETURN_IF_ERROR(released);
    for (size_t i : copied_index_) codes_[i] = BlockCode::kOk;
    return absl::OkStatus();
  }
  // FinishPut commits each chunk only after its own event; a failed copy publishes nothing of
  // its chunk (the slots stay reserved until the connection closes).
  const absl::Status put = FinishPut();
  KVTIER_RETURN_IF_ERROR(put);
  return synced;
}

absl::Status GpuTransfer::FinishPut() {
  // Chunks commit in order while later chunks may still be copying. A block is committed only
  // after its chunk's event said its copy landed, and the hash event that its checksum did.
  Client* client = owner_->client();
  // The checksums every commit carries (recorded whenever a chunk was).
  absl::Status status = chunks_.empty() ? absl::OkStatus() : hashed_.Synchronize();
  for (Chunk& chunk : chunks_) {
    if (status.ok()) status = chunk.event.Synchronize();
    if (!status.ok()) continue;  // after a failure nothing more is committed
    std::vector<protocol::PutCommitItem> items(chunk.end - chunk.begin);
    for (size_t j = 0; j < items.size(); ++j) {
      items[j].key = keys_[chunk.begin + j];
      items[j].checksum = sums_[chunk.begin + j];
    }
    auto done = client->PutCommit(items);
    if (!done.ok()) {
      status = done.status();
      continue;
    }
    for (size_t j = 0; j < done->size(); ++j) {
      codes_[copied_index_[chunk.begin + j]] = CodeOf((*done)[j]);
    }
  }
  if (sums_ != nullptr) owner_->ReleaseSums(std::exchange(sums_, nullptr));
  return status;
}

}  // namespace kvtier::client
