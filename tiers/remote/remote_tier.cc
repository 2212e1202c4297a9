#include "tiers/remote/remote_tier.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

namespace kvtier {

absl::Status RemoteTierOptions::Validate() const {
  std::vector<std::string> problems;
  if (absl::Status s = store.Validate(); !s.ok()) problems.emplace_back(s.message());
  if (slot_bytes == 0 || capacity_bytes < slot_bytes || capacity_bytes % slot_bytes != 0) {
    problems.push_back(
        fmt::format("remote.capacity_bytes: {} is not a positive multiple of t1.slot_bytes ({})",
                    capacity_bytes, slot_bytes));
  } else if (capacity_bytes / slot_bytes > UINT32_MAX - 1) {
    problems.push_back(fmt::format("remote.capacity_bytes: {} is more than {} slots of {} bytes",
                                   capacity_bytes, UINT32_MAX - 1, slot_bytes));
  }
  if (threads == 0 || threads > 256) {
    problems.push_back(fmt::format("remote.threads: {} is not in [1, 256]", threads));
  }
  if (lookup_budget_us == 0 || lookup_budget_us > 1000000) {
    problems.push_back(
        fmt::format("remote.lookup_budget_us: {} is not in [1, 1000000]", lookup_budget_us));
  }
  if (lookup_max_blocks == 0 || lookup_max_blocks > 65536) {
    problems.push_back(
        fmt::format("remote.lookup_max_blocks: {} is not in [1, 65536]", lookup_max_blocks));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}", fmt::join(problems, "\n")));
}

absl::StatusOr<std::unique_ptr<RemoteTier>> RemoteTier::Open(const RemoteTierOptions& options) {
  KVTIER_RETURN_IF_ERROR(options.Validate());
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<RemoteStore> store, RemoteStore::Open(options.store));
  return std::unique_ptr<RemoteTier>(new RemoteTier(options, std::move(store)));
}

RemoteTier::RemoteTier(const RemoteTierOptions& options, std::unique_ptr<RemoteStore> store)
    : options_(options),
      capacity_slots_(static_cast<uint32_t>(options.capacity_bytes / options.slot_bytes)),
      store_(std::move(store)),
      health_([this] { HealthLoop(); }),
      workers_(std::make_unique<VerifyPool>(options.threads)) {}

RemoteTier::~RemoteTier() {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    stopping_ = true;
  }
  health_cv_.notify_all();
  health_.join();
  workers_.reset();  // runs what was posted: every `done` is called
}

// While the breaker is open nothing may call the store, so nothing would find out it is back:
// probe it here, as the breaker allows (one EXISTS of a key nobody uses; refused at once while
// another call is the probe).
void RemoteTier::HealthLoop() {
  const BlockKey probe_key{0, 0};
  const auto every = std::chrono::milliseconds(options_.store.breaker_open_ms);
  std::unique_lock<std::mutex> lock(health_mu_);
  while (!health_cv_.wait_for(lock, every, [this] { return stopping_; })) {
    if (available()) continue;
    lock.unlock();
    RemoteOutcome present[1];
    (void)store_->Exists(absl::MakeConstSpan(&probe_key, 1), absl::MakeSpan(present));
    lock.lock();
  }
}

absl::StatusOr<SlotId> RemoteTier::Allocate() {
  if (!available()) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return absl::UnavailableError(
        "T3: the remote store is unavailable (its breaker is open or probing)");
  }
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used >= capacity_slots_) {
      rejected_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError("T3: this daemon's view of the store is full");
    }
  } while (!used_.compare_exchange_weak(used, used + 1, std::memory_order_relaxed));
  return SlotId{0};
}

void RemoteTier::Free(SlotId) { used_.fetch_sub(1, std::memory_order_relaxed); }

void RemoteTier::RunTransfer(std::function<void()> transfer) {
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    ++transfers_;
  }
  workers_->Post([this, transfer = std::move(transfer)] {
    transfer();
    std::lock_guard<std::mutex> lock(idle_mu_);
    if (--transfers_ == 0) idle_cv_.notify_all();
  });
}

void RemoteTier::WaitIdle() {
  std::unique_lock<std::mutex> lock(idle_mu_);
  idle_cv_.wait(lock, [this] { return transfers_ == 0; });
}

void RemoteTier::Write(SlotId, const BlockRecord& record, const void* src, IoDone done) {
  RunTransfer([this, record, src, done = std::move(done)] {
    RemotePutItem item;
    item.record = record;
    item.payload = src;
    absl::Status s = store_->Put(absl::MakeSpan(&item, 1));
    if (s.ok() && item.outcome != RemoteOutcome::kHit) {
      s = absl::InternalError(fmt::format("T3: block {} was not stored", record.key.ToHex()));
    }
    if (s.ok()) {
      io_.Write(record.payload_bytes);
    } else {
      io_.WriteErrors();
    }
    done(std::move(s));
  });
}

void RemoteTier::Read(SlotId, void*, IoDone done) {
  done(absl::InvalidArgumentError("T3 is key-addressed: read it with ReadRecord"));
}

void RemoteTier::ReadRecord(SlotId, const BlockRecord& record, void* dst, IoDone done) {
  RunTransfer([this, record, dst, done = std::move(done)] {
    RemoteGetItem item;
    item.key = record.key;
    item.namespace_id = record.namespace_id;
    item.dst = dst;
    item.dst_bytes = options_.slot_bytes;
    absl::Status s = store_->Get(absl::MakeSpan(&item, 1));
    if (s.ok() && item.outcome != RemoteOutcome::kHit) {
      s = absl::NotFoundError(fmt::format(
          "block {}: not in the remote store (evicted), or its value failed verification",
          record.key.ToHex()));
    } else if (s.ok() && record.payload_bytes != 0 &&
               item.record.payload_bytes != record.payload_bytes) {
      s = absl::DataLossError(fmt::format("block {}: the remote value holds {} bytes, not {}",
                                          record.key.ToHex(), item.record.payload_bytes,
                                          record.payload_bytes));
    }
    if (s.ok()) {
      io_.Read(item.record.payload_bytes);
    } else if (s.code() != absl::StatusCode::kNotFound) {
      io_.ReadError();
    }
    done(std::move(s));
  });
}

// The caller waits for the answer up to `budget`; the state is shared so a late answer lands in
// memory nobody reads any more instead of the caller's stack. (std::mutex, not absl::Notification:
// ThreadSanitizer sees libstdc++'s locks, not Debian's uninstrumented abseil.)
void RemoteTier::Probe(absl::Span<const BlockKey> keys, std::chrono::microseconds budget,
                       absl::Span<uint32_t> payload_bytes) {
  for (uint32_t& b : payload_bytes) b = 0;
  if (keys.empty() || !available()) return;
  struct State {
    std::vector<BlockKey> keys;
    std::vector<RemoteOutcome> present;
    std::vector<uint32_t> bytes;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;  // guarded by mu
  };
  auto state = std::make_shared<State>();
  state->keys.assign(keys.begin(), keys.end());
  state->present.resize(keys.size());
  state->bytes.resize(keys.size());
  workers_->Post([this, state] {
    std::vector<RemoteOutcome> present(state->keys.size());
    std::vector<uint32_t> bytes(state->keys.size());
    (void)store_->Probe(state->keys, absl::MakeSpan(present), absl::MakeSpan(bytes));
    std::lock_guard<std::mutex> lock(state->mu);
    state->present = std::move(present);
    state->bytes = std::move(bytes);
    state->done = true;
    state->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(state->mu);
  if (!state->cv.wait_for(lock, budget, [&] { return state->done; })) return;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (state->present[i] == RemoteOutcome::kHit && state->bytes[i] <= options_.slot_bytes) {
      payload_bytes[i] = state->bytes[i];
    }
  }
}

TierStats RemoteTier::Stats() const {
  TierStats s;
  s.slot_bytes = options_.slot_bytes;
  s.capacity_slots = capacity_slots_;
  s.used_slots = used_.load(std::memory_order_relaxed);
  io_.Fill(s);
  s.checksum_failures = store_->corrupt_values();
  s.rejected_allocations = rejected_.load(std::memory_order_relaxed);
  s.admitting = available();
  return s;
}

}  // namespace kvtier
