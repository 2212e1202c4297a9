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

BlockStatus StatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return BlockStatus::kOk;
    case absl::StatusCode::kNotFound:
      return BlockStatus::kNotFound;
    case absl::StatusCode::kDataLoss:
      return BlockStatus::kCorrupt;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
      return BlockStatus::kRetry;
    case absl::StatusCode::kFailedPrecondition:
      return BlockStatus::kBusy;
    default:
      return BlockStatus::kError;
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
  std::vector<GetResult> results;
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
  const size_t now = sessions_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (metrics_ != nullptr) metrics_->SetConnectedClients(now);
  return std::shared_ptr<Session>(new Session(*this, ns, NamespaceRoot(ns), id));
}

void Service::Close(Session& session) {
  {
    absl::MutexLock lock(&session.mu_);
    if (session.closed_) return;
    session.closed_ = true;
  }
  ReleaseAll(session);
  const size_t now = sessions_.fetch_sub(1, std::memory_order_relaxed) - 1;
  if (metrics_ != nullptr) metrics_->SetConnectedClients(now);
}

void Service::ReleaseAll(Session& session) {
  absl::flat_hash_map<BlockKey, uint32_t> leases;
  absl::flat_hash_map<BlockKey, Session::OpenPut> puts;
  {
    absl::MutexLock lock(&session.mu_);
    leases.swap(session.leases_);
    puts.swap(session.pending_puts_);
  }
  for (const auto& [key, count] : leases) {
    for (uint32_t i = 0; i < count; ++i) (void)tiers_.Release(key);
    leases_.fetch_sub(count, std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->AddLeases(-static_cast<int64_t>(count));
  }
  for (const auto& [key, put] : puts) tiers_.AbortPut(put.slot);
}

size_t Service::Lookup(Session& session, absl::Span<const BlockKey> keys,
                       absl::Span<TierMask> tiers) {
  KeyBuffer scoped(keys.size());
  scope_.ScopeAll(session.root_, keys, absl::MakeSpan(scoped));
  if (recorder_ != nullptr) recorder_->Record(session.ns_.block_tokens, scoped);
  const size_t n = tiers_.index().LookupPrefix(scoped, tiers);
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

GetResult Service::SettleGet(Session& session, const BlockKey& key,
                             absl::StatusOr<LeasedBlock> got) {
  if (!got.ok()) return GetResult{StatusOf(got.status()), kNoSlot, 0};
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
      return GetResult{BlockStatus::kOk, got->slot, got->payload_bytes};
    }
  }
  (void)tiers_.Release(key);  // the client went away while this block was on its way
  return GetResult{BlockStatus::kInvalid, kNoSlot, 0};
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
  for (size_t i = 0; i < keys.size(); ++i) {
    const BlockKey key = scope_.Scope(session->root_, keys[i]);
    tiers_.Get(key, tier,
               [this, session, batch, finish_one, key, i](absl::StatusOr<LeasedBlock> got) {
                 batch->results[i] = SettleGet(*session, key, std::move(got));
                 finish_one();
               });
  }
  finish_one();
}

std::vector<BlockStatus> Service::Release(Session& session, absl::Span<const BlockKey> keys) {
  std::vector<BlockStatus> out(keys.size(), BlockStatus::kInvalid);
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
    out[i] = StatusOf(tiers_.Release(key));
  }
  return out;
}

std::vector<PutBeginResult> Service::PutBegin(Session& session,
                                              absl::Span<const PutBeginItem> items) {
  std::vector<PutBeginResult> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    out[i].status = BeginOne(session, items[i], &out[i].slot);
    // A key repeated in one request is stored once: the occurrence that got the slot writes it,
    // the later ones are skipped as present (docs/protocol.md "Repeated keys"). Looked for only
    // when the put was found open already, so a request without repeats pays nothing.
    if (out[i].status == BlockStatus::kInvalid &&
        EarlierWith(items, i, [&](size_t j) { return out[j].status == BlockStatus::kOk; })) {
      out[i].status = BlockStatus::kAlreadyPresent;
    }
    if (out[i].status == BlockStatus::kOk) puts_begun_.fetch_add(1, std::memory_order_relaxed);
    if (out[i].status == BlockStatus::kRetry) puts_retry_.fetch_add(1, std::memory_order_relaxed);
  }
  return out;
}

BlockStatus Service::BeginOne(Session& session, const PutBeginItem& item, SlotId* slot_out) {
  if (item.payload_bytes == 0 || item.payload_bytes > tiers_.t1().slot_bytes()) {
    return BlockStatus::kInvalid;
  }
  const BlockKey key = scope_.Scope(session.root_, item.key);
  std::optional<BlockInfo> info = tiers_.index().Find(key);
  if (info && info->tiers != 0) {
    tiers_.CountPutAlreadyPresent();
    return BlockStatus::kAlreadyPresent;
  }
  absl::MutexLock lock(&session.mu_);
  if (session.closed_ || session.pending_puts_.contains(key)) return BlockStatus::kInvalid;
  absl::StatusOr<SlotId> slot = tiers_.AllocateForPut();
  if (!slot.ok()) return StatusOf(slot.status());
  std::optional<BlockKey> parent;
  if (item.parent) parent = scope_.Scope(session.root_, *item.parent);
  session.pending_puts_[key] =
      Session::OpenPut{*slot, item.payload_bytes, parent, std::chrono::steady_clock::now()};
  *slot_out = *slot;
  return BlockStatus::kOk;
}

std::vector<BlockStatus> Service::PutCommit(Session& session,
                                            absl::Span<const PutCommitItem> items) {
  std::vector<Committing> puts;
  TakeOpenPuts(session, items, puts);
  if (options_.verify_puts) VerifyPayloads(items, puts);
  std::vector<BlockStatus> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    out[i] = Publish(session, items[i], puts[i]);
    if (out[i] == BlockStatus::kOk) puts_committed_.fetch_add(1, std::memory_order_relaxed);
    // A key named again after this commit published it is present, not "no open put".
    if (!puts[i].open && EarlierWith(items, i, [&](size_t j) {
          return out[j] == BlockStatus::kOk || out[j] == BlockStatus::kAlreadyPresent;
        })) {
      out[i] = BlockStatus::kAlreadyPresent;
    }
  }
  return out;
}

void Service::TakeOpenPuts(Session& session, absl::Span<const PutCommitItem> items,
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
void Service::VerifyPayloads(absl::Span<const PutCommitItem> items, std::vector<Committing>& puts) {
  auto verify = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      Committing& c = puts[i];
      if (!c.open || items[i].checksum == 0) continue;
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

BlockStatus Service::Publish(Session& session, const PutCommitItem& item, Committing& c) {
  if (!c.open) return BlockStatus::kInvalid;
  if (c.bad_sum) {
    tiers_.AbortPut(c.put.slot);
    return BlockStatus::kBadChecksum;
  }
  const Session::OpenPut& put = c.put;
  const kvtier::PutCommit commit{c.key, session.namespace_id(), put.payload_bytes, item.checksum,
                                 put.parent ? &*put.parent : nullptr};
  absl::StatusOr<CommitOutcome> outcome = tiers_.CommitPut(commit, put.slot);
  if (!outcome.ok()) {
    tiers_.AbortPut(put.slot);
    return BlockStatus::kError;
  }
  if (metrics_ != nullptr) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - put.begun;
    metrics_->ObserveTransfer(TransferOp::kPut, took.count());
    metrics_->AddCopiedBytes(CopyDirection::kClientToT1, put.payload_bytes);
  }
  return *outcome == CommitOutcome::kStored ? BlockStatus::kOk : BlockStatus::kAlreadyPresent;
}

std::vector<BlockStatus> Service::PutAbort(Session& session, absl::Span<const BlockKey> keys) {
  std::vector<BlockStatus> out(keys.size(), BlockStatus::kInvalid);
  for (size_t i = 0; i < keys.size(); ++i) {
    const BlockKey key = scope_.Scope(session.root_, keys[i]);
    SlotId slot;
    {
      absl::MutexLock lock(&session.mu_);
      auto it = session.pending_puts_.find(key);
      if (it == session.pending_puts_.end()) continue;
      slot = it->second.slot;
      session.pending_puts_.erase(it);
    }
    tiers_.AbortPut(slot);
    puts_aborted_.fetch_add(1, std::memory_order_relaxed);
    out[i] = BlockStatus::kOk;
  }
  return out;
}

std::vector<BlockStatus> Service::Drop(Session& session, absl::Span<const BlockKey> keys) {
  std::vector<BlockStatus> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = StatusOf(tiers_.Drop(scope_.Scope(session.root_, keys[i])));
    if (out[i] == BlockStatus::kOk) drops_.fetch_add(1, std::memory_order_relaxed);
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
  return s;
}

}  // namespace kvtier
