#include "daemon/service.h"

#include <algorithm>
#include <bit>
#include <latch>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "common/checksum.h"
#include "common/log.h"
#include "daemon/lookup_recorder.h"
#include "daemon/metrics.h"

namespace kvtier {
namespace {

using KeyBuffer = absl::InlinedVector<BlockKey, 64>;
using protocol::BlockCode;

// The one translation of a tier manager answer into a block's code.
BlockCode CodeOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return BlockCode::kOk;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kDataLoss:  // its only copy failed its checksum: dropped, a miss
      return BlockCode::kMissing;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
      return BlockCode::kRetryLater;
    case absl::StatusCode::kFailedPrecondition:  // drop: leased
      return BlockCode::kLeased;
    default:
      return BlockCode::kFailed;
  }
}

// Whether an item before items[i] has the same key and satisfies `pred(j)`. Linear: called only
// for an item whose key turned out to be taken (a client repeating keys pays for its repeats).
template <typename Item, typename Pred>
bool EarlierWith(absl::Span<const Item> items, size_t i, Pred pred) {
  for (size_t j = 0; j < i; ++j) {
    if (items[j].key == items[i].key && pred(j)) return true;
  }
  return false;
}

// State of one Get batch: results fill in as blocks complete; the last one calls done.
struct GetBatch {
  std::vector<SlotResult> results;
  std::atomic<size_t> remaining{0};
  GetBatchDone done;
};

}  // namespace

Session::~Session() { service_.Close(*this); }

size_t Session::leases_held() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [key, count] : leases_) n += count;
  return n;
}

size_t Session::puts_pending() const {
  absl::MutexLock lock(&mu_);
  return pending_puts_.size();
}

Service::Service(TierManager& tiers, const KeyScope& scope, LookupRecorder* recorder,
                 DaemonMetrics* metrics, const ServiceOptions& options)
    : tiers_(tiers), scope_(scope), recorder_(recorder), metrics_(metrics), options_(options) {
  if (options_.verify_puts && options_.verify_threads > 0) {
    verify_pool_ = std::make_unique<VerifyPool>(options_.verify_threads);
  }
}

Service::~Service() = default;

absl::StatusOr<std::shared_ptr<Session>> Service::Open(const Namespace& ns) {
  KVTIER_RETURN_IF_ERROR(ns.Validate());
  const uint64_t id = next_session_id_.fetch_add(1, std::memory_order_relaxed);
  sessions_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->AddConnectedClients(1);
  BlockKey root = NamespaceRoot(ns);
  if (!options_.pool_scope.empty()) root = KeyScope::InPool(root, options_.pool_scope);
  return std::shared_ptr<Session>(new Session(*this, ns, root, id));
}

void Service::Close(Session& session) {
  {
    absl::MutexLock lock(&session.mu_);
    if (session.closed_) return;
    session.closed_ = true;
  }
  ReleaseAll(session);
  sessions_.fetch_sub(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->AddConnectedClients(-1);
}

void Service::ReleaseAll(Session& session) {
  absl::flat_hash_map<BlockKey, uint32_t> leases;
  absl::flat_hash_map<BlockKey, Session::OpenPut> puts;
  std::array<absl::flat_hash_set<SlotId>, 2> working;
  {
    absl::MutexLock lock(&session.mu_);
    leases.swap(session.leases_);
    puts.swap(session.pending_puts_);
    working.swap(session.working_);
  }
  for (size_t t = 0; t < working.size(); ++t) {
    for (SlotId slot : working[t]) (void)tiers_.AbortPut(slot, TierAt(static_cast<int>(t)));
    working_slots_.fetch_sub(working[t].size(), std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->OnWorkingSlots(WorkOp::kFree, working[t].size());
  }
  for (const auto& [key, count] : leases) {
    for (uint32_t i = 0; i < count; ++i) (void)tiers_.Release(key);
    leases_.fetch_sub(count, std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->AddLeases(-static_cast<int64_t>(count));
  }
  for (const auto& [key, put] : puts) (void)tiers_.AbortPut(put.slot, put.tier);
}

uint32_t Service::slot_bytes() const { return tiers_.t1().slot_bytes(); }

bool Service::has_t0() const { return tiers_.t0() != nullptr; }

T1Segment Service::t1_segment() const {
  const HostTier& t1 = tiers_.t1();
  return T1Segment{t1.fd(), t1.size(), t1.slot_bytes(), t1.capacity_slots()};
}

std::optional<T0Pool> Service::t0_pool() const {
  const DeviceTier* t0 = tiers_.t0();
  if (t0 == nullptr) return std::nullopt;
  return T0Pool{t0->device(),     t0->pci_bus_id(),     t0->size(),
                t0->slot_bytes(), t0->capacity_slots(), t0->ipc_handle()};
}

size_t Service::Lookup(Session& session, absl::Span<const BlockKey> keys,
                       absl::Span<TierMask> tiers) {
  KeyBuffer scoped(keys.size());
  scope_.ScopeAll(session.root_, keys, absl::MakeSpan(scoped));
  if (recorder_ != nullptr) recorder_->Record(session.ns_.block_tokens, scoped);
  size_t n = tiers_.index().LookupPrefix(scoped, tiers);
  // A miss past the local prefix may be in the fleet's remote store (bounded by its budget).
  if (n < keys.size() && tiers_.t3() != nullptr) {
    n = tiers_.ExtendPrefix(scoped, n, session.namespace_id(), tiers);
  }
  lookups_.fetch_add(1, std::memory_order_relaxed);
  lookup_keys_.fetch_add(keys.size(), std::memory_order_relaxed);
  lookup_hit_blocks_.fetch_add(n, std::memory_order_relaxed);
  if (metrics_ != nullptr) {
    std::array<uint64_t, kNumTiers> by_tier{};
    // A found block is in at least one tier, so countr_zero is a tier's index (< kNumTiers).
    for (size_t i = 0; i < n; ++i) {
      ++by_tier[static_cast<size_t>(std::countr_zero(static_cast<unsigned>(tiers[i])))];
    }
    metrics_->OnLookup(keys.size(), by_tier, session.ns_.block_tokens);
  }
  return n;
}

SlotResult Service::SettleGet(Session& session, const BlockKey& key,
                              absl::StatusOr<LeasedBlock> got) {
  if (!got.ok()) return SlotResult{CodeOf(got.status()), kNoSlot, 0};
  {
    absl::MutexLock lock(&session.mu_);
    if (!session.closed_) {
      ++session.leases_[key];
      leases_.fetch_add(1, std::memory_order_relaxed);
      if (metrics_ != nullptr) {
        metrics_->AddLeases(1);
        metrics_->AddCopiedBytes(
            got->tier == Tier::kT0 ? CopyDirection::kT0ToClient : CopyDirection::kT1ToClient,
            got->payload_bytes);
      }
      return SlotResult{BlockCode::kOk, got->slot, got->payload_bytes};
    }
  }
  (void)tiers_.Release(key);  // the client went away while this block was on its way
  return SlotResult{BlockCode::kMissing, kNoSlot, 0};
}

void Service::Get(const std::shared_ptr<Session>& session, absl::Span<const BlockKey> keys,
                  Tier tier, GetBatchDone done) {
  gets_.fetch_add(1, std::memory_order_relaxed);
  get_blocks_.fetch_add(keys.size(), std::memory_order_relaxed);
  auto batch = std::make_shared<GetBatch>();
  batch->results.resize(keys.size());
  batch->remaining.store(keys.size() + 1, std::memory_order_relaxed);  // +1: this call's own
  batch->done = std::move(done);
  const auto start = std::chrono::steady_clock::now();
  auto finish_one = [batch, start, metrics = metrics_] {
    if (batch->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (metrics != nullptr) {
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      metrics->ObserveTransfer(TransferOp::kGet, took.count());
    }
    batch->done(std::move(batch->results));
  };
  KeyBuffer scoped(keys.size());
  scope_.ScopeAll(session->root_, keys, absl::MakeSpan(scoped));
  // Blocks only the fleet's remote store holds become T3 copies first (one probe, if any).
  if (tiers_.t3() != nullptr) tiers_.FindShared(scoped, session->namespace_id());
  for (size_t i = 0; i < keys.size(); ++i) {
    const BlockKey key = scoped[i];
    tiers_.Get(key, tier,
               [this, session, batch, finish_one, key, i](absl::StatusOr<LeasedBlock> got) {
                 batch->results[i] = SettleGet(*session, key, std::move(got));
                 finish_one();
               });
  }
  finish_one();
}

std::vector<BlockCode> Service::Release(Session& session, absl::Span<const BlockKey> keys) {
  std::vector<BlockCode> out(keys.size(), BlockCode::kMissing);
  for (size_t i = 0; i < keys.size(); ++i) {
    const BlockKey key = scope_.Scope(session.root_, keys[i]);
    {
      absl::MutexLock lock(&session.mu_);
      auto it = session.leases_.find(key);
      if (session.closed_ || it == session.leases_.end()) continue;
      if (--it->second == 0) session.leases_.erase(it);
    }
    leases_.fetch_sub(1, std::memory_order_relaxed);
    releases_.fetch_add(1, std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->AddLeases(-1);
    out[i] = CodeOf(tiers_.Release(key));
  }
  return out;
}

std::vector<SlotResult> Service::PutBegin(Session& session,
                                          absl::Span<const protocol::PutBeginItem> items,
                                          Tier tier) {
  std::vector<SlotResult> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    out[i] = BeginOne(session, items, i, absl::MakeConstSpan(out).first(i), tier);
    if (out[i].code == BlockCode::kOk) puts_begun_.fetch_add(1, std::memory_order_relaxed);
    if (out[i].code == BlockCode::kRetryLater) {
      puts_retry_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return out;
}

bool Service::AlreadyPresent(const BlockKey& key) const {
  const std::optional<BlockInfo> info = tiers_.index().Find(key);
  return info && info->tiers != 0;
}

SlotResult Service::BeginOne(Session& session, absl::Span<const protocol::PutBeginItem> items,
                             size_t i, absl::Span<const SlotResult> begun, Tier tier) {
  const protocol::PutBeginItem& item = items[i];
  if (item.payload_bytes == 0 || item.payload_bytes > slot_bytes()) {
    return SlotResult{BlockCode::kFailed};
  }
  const BlockKey key = scope_.Scope(session.root_, item.key);
  if (AlreadyPresent(key)) {
    tiers_.CountPutAlreadyPresent();
    return SlotResult{BlockCode::kAlreadyPresent};
  }
  SlotResult opened;
  {
    absl::MutexLock lock(&session.mu_);
    opened = OpenPutLocked(session, key, item, tier);
  }
  // A key repeated in one request is stored once: the occurrence that got the slot writes it, the
  // later ones are skipped as present (docs/protocol.md "Repeated keys"). Looked for only when the
  // put was found open already, so a request without repeats pays nothing.
  if (opened.code == BlockCode::kMissing &&
      EarlierWith(items, i, [&](size_t j) { return begun[j].code == BlockCode::kOk; })) {
    return SlotResult{BlockCode::kAlreadyPresent};
  }
  return opened;
}

SlotResult Service::OpenPutLocked(Session& session, const BlockKey& key,
                                  const protocol::PutBeginItem& item, Tier tier) {
  if (session.closed_ || session.pending_puts_.contains(key)) {
    return SlotResult{BlockCode::kMissing};
  }
  absl::StatusOr<SlotId> slot = tiers_.AllocateForPut(tier);
  if (!slot.ok()) return SlotResult{CodeOf(slot.status())};
  std::optional<BlockKey> parent;
  if (item.parent) parent = scope_.Scope(session.root_, *item.parent);
  session.pending_puts_[key] =
      Session::OpenPut{tier, *slot, item.payload_bytes, parent, std::chrono::steady_clock::now()};
  return SlotResult{BlockCode::kOk, *slot, item.payload_bytes};
}

std::vector<BlockCode> Service::PutCommit(Session& session,
                                          absl::Span<const protocol::PutCommitItem> items) {
  std::vector<Committing> puts;
  TakeOpenPuts(session, items, puts);
  if (options_.verify_puts) VerifyPayloads(items, puts);
  std::vector<BlockCode> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    out[i] = Publish(session, items[i], puts[i]);
    if (out[i] == BlockCode::kOk) puts_committed_.fetch_add(1, std::memory_order_relaxed);
    // A key named again after this commit published it is present, not "no open put".
    if (!puts[i].open && EarlierWith(items, i, [&](size_t j) {
          return out[j] == BlockCode::kOk || out[j] == BlockCode::kAlreadyPresent;
        })) {
      out[i] = BlockCode::kAlreadyPresent;
    }
  }
  return out;
}

void Service::TakeOpenPuts(Session& session, absl::Span<const protocol::PutCommitItem> items,
                           std::vector<Committing>& out) {
  out.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) out[i].key = scope_.Scope(session.root_, items[i].key);
  absl::MutexLock lock(&session.mu_);
  if (session.closed_) return;
  for (Committing& c : out) {
    auto it = session.pending_puts_.find(c.key);
    if (it == session.pending_puts_.end()) continue;  // not open, or named twice in this commit
    c.put = it->second;
    c.open = true;
    session.pending_puts_.erase(it);
  }
}

// The client wrote each slot through its own mapping; what is published must be what it meant.
// A large commit (a GPU put's chunk: tens of MiB) is hashed on the pool, the items split into one
// contiguous run per thread; a small one on this thread, where a hand-off would cost more.
void Service::VerifyPayloads(absl::Span<const protocol::PutCommitItem> items,
                             std::vector<Committing>& puts) {
  auto verify = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      Committing& c = puts[i];
      // A T0 slot is not host memory: its payload is checked when first written to T2.
      if (!c.open || items[i].checksum == 0 || c.put.tier != Tier::kT1) continue;
      c.bad_sum = PayloadChecksum(tiers_.t1().SlotData(c.put.slot), c.put.payload_bytes) !=
                  items[i].checksum;
    }
  };
  uint64_t bytes = 0;
  for (const Committing& c : puts) bytes += c.open ? c.put.payload_bytes : 0;
  const size_t parts = verify_pool_ == nullptr || bytes < kParallelVerifyBytes
                           ? 1
                           : std::min<size_t>(options_.verify_threads, puts.size());
  if (parts <= 1) {
    verify(0, puts.size());
    return;
  }
  std::latch done(static_cast<std::ptrdiff_t>(parts));
  for (size_t p = 0; p < parts; ++p) {
    verify_pool_->Post([&, p] {
      verify(puts.size() * p / parts, puts.size() * (p + 1) / parts);
      done.count_down();
    });
  }
  done.wait();
}

BlockCode Service::Publish(Session& session, const protocol::PutCommitItem& item, Committing& c) {
  if (!c.open) return BlockCode::kMissing;
  if (c.bad_sum) {
    (void)tiers_.AbortPut(c.put.slot, c.put.tier);
    return BlockCode::kBadChecksum;
  }
  const Session::OpenPut& put = c.put;
  kvtier::PutCommit commit{c.key, session.namespace_id(), put.payload_bytes, item.checksum,
                           put.parent ? &*put.parent : nullptr};
  commit.tier = put.tier;
  absl::StatusOr<CommitOutcome> outcome = tiers_.CommitPut(commit, put.slot);
  if (!outcome.ok()) {
    (void)tiers_.AbortPut(put.slot, put.tier);
    return BlockCode::kFailed;
  }
  if (metrics_ != nullptr) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - put.begun;
    metrics_->ObserveTransfer(TransferOp::kPut, took.count());
    metrics_->AddCopiedBytes(
        put.tier == Tier::kT0 ? CopyDirection::kClientToT0 : CopyDirection::kClientToT1,
        put.payload_bytes);
  }
  return *outcome == CommitOutcome::kStored ? BlockCode::kOk : BlockCode::kAlreadyPresent;
}

std::vector<BlockCode> Service::PutAbort(Session& session, absl::Span<const BlockKey> keys) {
  std::vector<BlockCode> out(keys.size(), BlockCode::kMissing);
  for (size_t i = 0; i < keys.size(); ++i) {
    const BlockKey key = scope_.Scope(session.root_, keys[i]);
    Session::OpenPut put;
    {
      absl::MutexLock lock(&session.mu_);
      auto it = session.pending_puts_.find(key);
      if (it == session.pending_puts_.end()) continue;
      put = it->second;
      session.pending_puts_.erase(it);
    }
    (void)tiers_.AbortPut(put.slot, put.tier);
    puts_aborted_.fetch_add(1, std::memory_order_relaxed);
    out[i] = BlockCode::kOk;
  }
  return out;
}

std::vector<BlockCode> Service::Drop(Session& session, absl::Span<const BlockKey> keys) {
  std::vector<BlockCode> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = CodeOf(tiers_.Drop(scope_.Scope(session.root_, keys[i])));
    if (out[i] == BlockCode::kOk) drops_.fetch_add(1, std::memory_order_relaxed);
  }
  return out;
}

ServiceStats Service::Stats() const {
  ServiceStats s;
  s.lookups = lookups_.load();
  s.lookup_keys = lookup_keys_.load();
  s.lookup_hit_blocks = lookup_hit_blocks_.load();
  s.gets = gets_.load();
  s.get_blocks = get_blocks_.load();
  s.puts_begun = puts_begun_.load();
  s.puts_committed = puts_committed_.load();
  s.puts_aborted = puts_aborted_.load();
  s.puts_retry = puts_retry_.load();
  s.releases = releases_.load();
  s.drops = drops_.load();
  s.requests_invalid = requests_invalid_.load();
  s.promotions = tiers_.Stats().tier(Tier::kT1).gets_promoted;
  const TierStats t1 = tiers_.t1().Stats();
  s.t1_slots_total = t1.capacity_slots;
  s.t1_slots_free = t1.capacity_slots - t1.used_slots;
  s.leases_held = leases_held();
  s.working_slots = working_slots_.load();
  s.work_taken = work_taken_.load();
  s.work_published = work_published_.load();
  s.work_freed = work_freed_.load();
  s.work_over_quota = work_over_quota_.load();
  return s;
}

}  // namespace kvtier
