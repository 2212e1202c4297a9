#include "engine/daemon_kv_blocks.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace kvtier::engine {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;

constexpr size_t kMaxPerCall = 1024;  // the protocol's items per request
// Slots a load leaves free beyond the growth it counts: a 512-token first chunk of 16-token blocks.
constexpr int64_t kLoadHeadroom = 32;
// Steps a lookup's answer is used for before the prefix is looked up again.
constexpr uint64_t kLookupFreshSteps = 8;
// Working slots CanTake takes beyond what it is asked, within reserve_max: fewer round trips.
constexpr int64_t kTopUpSlots = 8;

BlockCode CodeOf(const BlockResult& r) { return static_cast<BlockCode>(r.code); }

// call(), its time added to stats.call_ms[kind].
template <typename Call>
auto Timed(DaemonKvBlocksStats& stats, KvCall kind, Call&& call) {
  const KvCallTimer timer(stats, kind);
  return call();
}

// The slot count of a tier of `slots` slots of `tier_slot_bytes`, when those are exactly
// `slot_bytes` (the engine indexes slot * slot_bytes). T0's slots are T1's size, so either is set
// with --t1.slot_bytes.
absl::StatusOr<int32_t> TierSlots(const char* tier, uint64_t tier_slot_bytes, uint64_t slots,
                                  uint64_t slot_bytes) {
  if (tier_slot_bytes != slot_bytes) {
    return absl::InvalidArgumentError(fmt::format(
        "engine KV in kvtierd: {}'s slots are {} bytes, the engine's blocks {}: start kvtierd with "
        "--t1.slot_bytes {} to attend in place",
        tier, tier_slot_bytes, slot_bytes, slot_bytes));
  }
  if (slots < 1 || slots > static_cast<uint64_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(fmt::format(
        "engine KV in kvtierd: {} holds {} slots of {} bytes", tier, slots, slot_bytes));
  }
  return static_cast<int32_t>(slots);
}

absl::StatusOr<int32_t> T1Slots(const client::Client& client, uint64_t slot_bytes) {
  const uint64_t have = client.slot_bytes();
  return TierSlots("T1", have, have == 0 ? 0 : client.t1_bytes() / have, slot_bytes);
}

absl::StatusOr<int32_t> T0Slots(const client::Client& client, uint64_t slot_bytes) {
  const std::optional<client::T0Info> t0 = client.t0();
  if (!t0.has_value()) {
    return absl::FailedPreconditionError(
        "engine KV in kvtierd's T0: the daemon has no T0 (start it with --t0.capacity_bytes on "
        "this GPU)");
  }
  return TierSlots("T0", t0->slot_bytes, t0->slots, slot_bytes);
}

// The tier a lookup found a block in (the highest of several).
CacheSource SourceOf(TierMask tiers) {
  if (tiers & TierBit(Tier::kT0)) return CacheSource::kT0;
  if (tiers & TierBit(Tier::kT1)) return CacheSource::kT1;
  if (tiers & TierBit(Tier::kT2)) return CacheSource::kT2;
  return CacheSource::kT3;  // only the remote tier holds it
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonKvBlocks>> DaemonKvBlocks::Create(
    client::Client* client, int64_t block_tokens, uint64_t slot_bytes,
    const DaemonKvBlocksOptions& options) {
  if (options.tier != Tier::kT1 && options.tier != Tier::kT0) {
    return absl::InvalidArgumentError("engine KV in kvtierd: the pool is T0 or T1");
  }
  if (options.tier == Tier::kT0 && !options.checksum) {
    return absl::InvalidArgumentError(
        "engine KV in kvtierd's T0: no checksum function (the GPU hashes what it publishes)");
  }
  if (block_tokens < 1) {
    return absl::InvalidArgumentError(
        fmt::format("engine KV in kvtierd: block_tokens {} < 1", block_tokens));
  }
  KVTIER_ASSIGN_OR_RETURN(const int32_t slots, options.tier == Tier::kT0
                                                   ? T0Slots(*client, slot_bytes)
                                                   : T1Slots(*client, slot_bytes));
  return std::unique_ptr<DaemonKvBlocks>(
      new DaemonKvBlocks(client, block_tokens, slot_bytes, slots, options));
}

absl::StatusOr<CpuKvPool> DaemonKvBlocks::CpuPool(client::Client* client,
                                                  const ops::PagedKvGeometry& geometry) {
  KVTIER_ASSIGN_OR_RETURN(
      const int32_t slots,
      T1Slots(*client, static_cast<uint64_t>(geometry.slot_elems()) * sizeof(float)));
  return CpuKvPool(geometry, slots, reinterpret_cast<float*>(client->t1_base()));
}

DaemonKvBlocks::DaemonKvBlocks(client::Client* client, int64_t block_tokens, uint64_t slot_bytes,
                               int32_t num_slots, const DaemonKvBlocksOptions& options)
    : client_(client),
      block_tokens_(block_tokens),
      slot_bytes_(slot_bytes),
      num_slots_(num_slots),
      options_(options),
      prefix_tiers_(TierBit(options.tier)) {
  for (int i = 0; i <= TierIndex(options.lowest_prefix_tier); ++i)
    prefix_tiers_ |= TierBit(TierAt(i));
}

DaemonKvBlocks::~DaemonKvBlocks() {
  if (stats_.lookups > 0 || stats_.published > 0) {
    KVTIER_LOG(kInfo, "engine", "kvtierd KV blocks: {}", FormatStats(stats_));
  }
  // Leases and working slots go back with the connection too; this is for a client that stays.
  std::vector<BlockKey> leased;
  for (auto& [id, st] : states_) {
    for (size_t i = 0; i < st.holds.size(); ++i) {
      if (st.holds[i] == Hold::kLeased) leased.push_back(st.keys[i]);
    }
    for (size_t i = 0; i < st.pending_slots.size(); ++i) leased.push_back(st.keys[i]);
  }
  ReleaseKeys(leased);
  for (size_t at = 0; at < reserve_.size(); at += kMaxPerCall) {
    const size_t n = std::min(kMaxPerCall, reserve_.size() - at);
    (void)client_->FreeWorking(options_.tier, absl::MakeConstSpan(reserve_).subspan(at, n));
  }
}

void DaemonKvBlocks::Fail(const absl::Status& s) {
  if (status_.ok()) status_ = s;
}

void DaemonKvBlocks::ReleaseKeys(const std::vector<BlockKey>& keys) {
  for (size_t at = 0; at < keys.size(); at += kMaxPerCall) {
    const size_t n = std::min(kMaxPerCall, keys.size() - at);
    const KvCallTimer timer(stats_, KvCall::kRelease);
    absl::StatusOr<std::vector<BlockResult>> r =
        client_->Release(absl::MakeConstSpan(keys).subspan(at, n));
    if (!r.ok()) Fail(r.status());
  }
}

const std::vector<BlockKey>* DaemonKvBlocks::KeysUpTo(Sequence& seq, State& st, int64_t n) {
  const auto have = static_cast<int64_t>(st.keys.size());
  if (have >= n) return &st.keys;
  std::vector<uint32_t> tokens(seq.tokens().begin() + have * block_tokens_,
                               seq.tokens().begin() + n * block_tokens_);
  std::optional<BlockKey> parent;
  if (have > 0) parent = st.keys.back();
  const KvCallTimer timer(stats_, KvCall::kKeys);
  absl::StatusOr<std::vector<BlockKey>> more = client_->KeysFor(tokens, parent);
  if (!more.ok()) {
    Fail(more.status());
    return nullptr;
  }
  st.keys.insert(st.keys.end(), more->begin(), more->end());
  return &st.keys;
}

void DaemonKvBlocks::DropLeases(uint64_t id) {
  auto it = states_.find(id);
  if (it == states_.end() || it->second.pending_slots.empty()) return;
  State& st = it->second;
  ReleaseKeys(std::vector<BlockKey>(
      st.keys.begin(), st.keys.begin() + static_cast<ptrdiff_t>(st.pending_slots.size())));
  st.pending_slots.clear();
  st.pending_from.clear();
}

bool DaemonKvBlocks::DropLoad() {
  if (loading_ == 0) return false;
  auto it = states_.find(std::exchange(loading_, 0));
  if (it == states_.end() || it->second.load_ticket == 0) return false;
  loader_->Finish(std::exchange(it->second.load_ticket, 0));
  it->second.load_from.clear();
  return true;
}

bool DaemonKvBlocks::GiveBackUnadmitted() {
  bool held = false;
  if (pending_owner_ != 0) {
    auto it = states_.find(pending_owner_);
    held = it != states_.end() && !it->second.pending_slots.empty();
    DropLeases(std::exchange(pending_owner_, 0));
  }
  // A load still in flight goes on (it had room when it started, and giving it up frees nothing
  // until its request ends); a finished one nobody took yet holds its blocks: those go back.
  return (LoadDone() && DropLoad()) || held;
}

bool DaemonKvBlocks::LoadDone() {
  if (loading_ == 0) return false;
  const auto it = states_.find(loading_);
  return it != states_.end() && it->second.load_ticket != 0 &&
         loader_->Poll(it->second.load_ticket).done;
}

int64_t DaemonKvBlocks::CachedPrefixBlocks(Sequence& seq) {
  State& st = states_[seq.id()];
  st.asked_round = round_;
  // A prefix still on its way: the scheduler passes it over, and the leases of the sequence
  // behind it stay.
  if (st.load_ticket != 0 && !loader_->Poll(st.load_ticket).done) return kPrefixLoading;
  // One sequence at a time waits with a leased prefix (the one the scheduler tries to admit):
  // leases kept for sequences pushed back in the queue would pin the tier until it is all ours.
  if (pending_owner_ != 0 && pending_owner_ != seq.id()) DropLeases(pending_owner_);
  pending_owner_ = seq.id();
  if (!st.pending_slots.empty()) return static_cast<int64_t>(st.pending_slots.size());
  if (st.load_ticket != 0) return LoadedPrefix(st);
  const int64_t limit = LookupLimit(seq);
  if (limit < 1 || !status_.ok()) return 0;
  const std::vector<BlockKey>* keys = KeysUpTo(seq, st, limit);
  if (keys == nullptr) return 0;
  const auto wanted = absl::MakeConstSpan(*keys).subspan(0, static_cast<size_t>(limit));
  absl::StatusOr<client::LookupResult> where;
  // An older answer whose hit is all in the pool's tier is asked again: a block evicted since
  // would be promoted by the lease below, on this thread (a disk read, from T2), where the
  // loader exists to do it. (What stays is the one round trip between this lookup and the lease.)
  if (Fresh(st) && (loader_ == nullptr || st.looked_step == step_ || !HitInPool(*st.looked))) {
    where = *st.looked;  // a recent answer (LookAhead's, or ours while the prefix waited)
  } else {
    ++stats_.lookups;
    const KvCallTimer timer(stats_, KvCall::kLookup);
    where = client_->Lookup(wanted);
    if (where.ok()) {
      st.looked = *where;
      st.looked_step = step_;
    }
  }
  if (!where.ok()) {
    Fail(where.status());
    return 0;
  }
  where->hit_blocks = UsableRun(*where);
  if (where->hit_blocks == 0) return 0;
  std::vector<CacheSource> from;
  int64_t to_load = 0;  // blocks not in the pool's tier yet: leasing them promotes them
  for (size_t i = 0; i < where->hit_blocks; ++i) {
    from.push_back(SourceOf(where->tiers[i]));
    to_load += (where->tiers[i] & TierBit(options_.tier)) == 0 ? 1 : 0;
  }
  const auto hit = wanted.subspan(0, where->hit_blocks);
  if (loader_ != nullptr && to_load > 0) {
    if (!LoaderFree() || !RoomToLoad(to_load)) {
      ++stats_.loads_deferred;
      return kPrefixWaitsForRoom;  // asked again next step
    }
    st.looked.reset();
    st.load_from = std::move(from);
    st.load_ticket = loader_->Start(std::vector<BlockKey>(hit.begin(), hit.end()));
    loading_ = seq.id();
    ++stats_.loads;
    return kPrefixLoading;
  }
  st.looked.reset();
  return LeaseRun(st, hit, from);
}

bool DaemonKvBlocks::LoaderFree() {
  if (loading_ == 0) return true;
  // Its sequence was asked before this one in this round: it comes first, and takes its load when
  // done (in the next round at the latest).
  if (states_.at(loading_).asked_round == round_ || !LoadDone()) return false;
  // Done, and its sequence is behind this one in the queue (a preempted sequence went in front
  // of it) where nobody asks it: give it back, so that loads cannot wait on each other.
  DropLoad();
  return true;
}

size_t DaemonKvBlocks::UsableRun(const client::LookupResult& where) const {
  size_t n = 0;
  while (n < where.hit_blocks && n < where.tiers.size() && (where.tiers[n] & prefix_tiers_) != 0) {
    ++n;
  }
  return n;
}

bool DaemonKvBlocks::RoomToLoad(int64_t slots) const {
  int64_t held = 0;  // slots of the pool this engine holds (leased or working), its reserve apart
  for (const auto& [id, st] : states_) {
    held += static_cast<int64_t>(st.holds.size() + st.pending_slots.size());
  }
  if (held == 0) return true;  // nothing of ours to wait for: load what the pool takes
  // The reserve serves the running sequences' growth first; a first chunk needs a few more.
  const int64_t growth = std::max<int64_t>(growth_reserve_, static_cast<int64_t>(reserve_.size()));
  return held + slots + growth + kLoadHeadroom <= num_slots_;
}

int64_t DaemonKvBlocks::LoadedPrefix(State& st) {
  const PrefixLoader::Result loaded = loader_->Poll(st.load_ticket);
  if (!loaded.done) return kPrefixLoading;
  int64_t run = 0;
  if (!loaded.status.ok()) {
    Fail(loaded.status);
  } else if (loaded.run > 0) {  // in the tier now, leased by the loader: a hit here
    run = LeaseRun(st, absl::MakeConstSpan(st.keys).subspan(0, loaded.run), st.load_from);
  }
  loader_->Finish(std::exchange(st.load_ticket, 0));  // after ours: nothing evicted them between
  st.load_from.clear();
  loading_ = 0;
  return run;
}

int64_t DaemonKvBlocks::LeaseRun(State& st, absl::Span<const BlockKey> keys,
                                 std::span<const CacheSource> from) {
  // Lease the leading run in the pool's tier (the daemon promotes into it as needed).
  absl::StatusOr<std::vector<BlockResult>> got =
      Timed(stats_, KvCall::kLease, [&] { return client_->Get(keys, options_.tier); });
  if (!got.ok()) {
    Fail(got.status());
    return 0;
  }
  size_t run = 0;
  while (run < got->size() && CodeOf((*got)[run]) == BlockCode::kOk &&
         (*got)[run].payload_bytes == slot_bytes_) {
    st.pending_slots.push_back((*got)[run].slot);
    st.pending_from.push_back(run < from.size() ? from[run] : CacheSource::kT0);
    ++run;
  }
  std::vector<BlockKey> unused;  // leased past the first gap: not usable as a prefix
  for (size_t i = run; i < got->size(); ++i) {
    if (CodeOf((*got)[i]) == BlockCode::kOk) unused.push_back(keys[i]);
  }
  ReleaseKeys(unused);
  stats_.leased_blocks += static_cast<int64_t>(run);
  return static_cast<int64_t>(run);
}

int64_t DaemonKvBlocks::LookupLimit(const Sequence& seq) const {
  return std::min<int64_t>((seq.num_tokens() - 1) / block_tokens_,
                           static_cast<int64_t>(kMaxPerCall));
}

bool DaemonKvBlocks::HitInPool(const client::LookupResult& where) const {
  const size_t run = UsableRun(where);
  for (size_t i = 0; i < run; ++i) {
    if ((where.tiers[i] & TierBit(options_.tier)) == 0) return false;
  }
  return run > 0;
}

bool DaemonKvBlocks::Fresh(const State& st) const {
  return st.looked.has_value() && step_ - st.looked_step < kLookupFreshSteps;
}

void DaemonKvBlocks::LookAhead(std::span<Sequence* const> waiting) {
  if (!status_.ok()) return;
  // The states first (inserting may move the map's entries), then spans over their keys.
  std::vector<std::pair<Sequence*, int64_t>> asked;  // and the blocks to look up
  for (Sequence* seq : waiting) {
    const State& st = states_[seq->id()];
    const int64_t limit = LookupLimit(*seq);
    if (st.pending_slots.empty() && st.load_ticket == 0 && limit >= 1 && !Fresh(st)) {
      asked.emplace_back(seq, limit);
    }
  }
  std::vector<absl::Span<const BlockKey>> spans;
  for (const auto& [seq, limit] : asked) {
    const std::vector<BlockKey>* keys = KeysUpTo(*seq, states_.at(seq->id()), limit);
    if (keys == nullptr) return;
    spans.push_back(absl::MakeConstSpan(*keys).subspan(0, static_cast<size_t>(limit)));
  }
  if (spans.empty()) return;
  ++stats_.lookup_batches;
  stats_.lookups += static_cast<int64_t>(spans.size());
  absl::StatusOr<std::vector<client::LookupResult>> found =
      Timed(stats_, KvCall::kLookup, [&] { return client_->LookupMany(spans); });
  if (!found.ok()) {
    Fail(found.status());
    return;
  }
  for (size_t i = 0; i < asked.size() && i < found->size(); ++i) {
    State& st = states_.at(asked[i].first->id());
    st.looked = std::move((*found)[i]);
    st.looked_step = step_;
  }
}

int64_t DaemonKvBlocks::SlotsToAdmit(Sequence& seq, int64_t cached, int64_t end) {
  return std::max<int64_t>(0, BlocksFor(end) - cached);
}

int64_t DaemonKvBlocks::SlotsToGrow(const Sequence& seq, int64_t end) const {
  return std::max<int64_t>(0, BlocksFor(end) - static_cast<int64_t>(seq.block_table().size()));
}

bool DaemonKvBlocks::CanTake(int64_t slots) {
  while (static_cast<int64_t>(reserve_.size()) < slots && status_.ok()) {
    const int64_t extra =
        std::clamp<int64_t>(int64_t{options_.reserve_max} - slots, 0, kTopUpSlots);
    const auto want = static_cast<size_t>(std::min<int64_t>(
        slots - static_cast<int64_t>(reserve_.size()) + extra, int64_t{kMaxPerCall}));
    absl::StatusOr<std::vector<BlockResult>> took = Timed(
        stats_, KvCall::kTake, [&] { return client_->TakeWorkingSlots(options_.tier, want); });
    if (!took.ok()) {
      Fail(took.status());
      break;
    }
    size_t ok = 0;
    for (const BlockResult& r : *took) {
      if (CodeOf(r) != BlockCode::kOk) continue;
      reserve_.push_back(r.slot);
      ++ok;
    }
    stats_.working_taken += static_cast<int64_t>(ok);
    if (ok < want) break;  // the quota or the tier is full now: the scheduler waits or preempts
  }
  return static_cast<int64_t>(reserve_.size()) >= slots;
}

void DaemonKvBlocks::Admit(Sequence& seq, int64_t cached, int64_t end) {
  State& st = states_[seq.id()];
  std::vector<int32_t>& table = seq.mutable_block_table();
  std::vector<BlockKey> unused;
  for (size_t i = 0; i < st.pending_slots.size(); ++i) {
    if (static_cast<int64_t>(i) < cached) {
      table.push_back(static_cast<int32_t>(st.pending_slots[i]));
      st.holds.push_back(Hold::kLeased);
      seq.AddCachedTokens(block_tokens_, st.pending_from[i]);
      ++stats_.attached_from[static_cast<size_t>(st.pending_from[i])];
    } else {
      unused.push_back(st.keys[i]);
    }
  }
  st.pending_slots.clear();
  st.pending_from.clear();
  if (pending_owner_ == seq.id()) pending_owner_ = 0;
  ReleaseKeys(unused);
  stats_.attached_blocks += cached;
  Grow(seq, end);
}

void DaemonKvBlocks::Grow(Sequence& seq, int64_t end) {
  State& st = states_[seq.id()];
  std::vector<int32_t>& table = seq.mutable_block_table();
  while (static_cast<int64_t>(table.size()) < BlocksFor(end) && !reserve_.empty()) {
    table.push_back(static_cast<int32_t>(reserve_.back()));
    reserve_.pop_back();
    st.holds.push_back(Hold::kWorking);
  }
}

void DaemonKvBlocks::Commit(Sequence& seq, int64_t from) {
  State& st = states_[seq.id()];
  const int64_t full = seq.num_computed_tokens() / block_tokens_;
  if (full < 1 || KeysUpTo(seq, st, full) == nullptr) return;
  for (int64_t i = from / block_tokens_; i < full; ++i) {
    if (st.holds[static_cast<size_t>(i)] != Hold::kWorking) continue;
    const auto slot = static_cast<uint32_t>(seq.block_table()[static_cast<size_t>(i)]);
    protocol::WorkPublishItem item;
    item.key = st.keys[static_cast<size_t>(i)];
    if (i > 0) item.parent = st.keys[static_cast<size_t>(i - 1)];
    item.slot = slot;
    item.payload_bytes = static_cast<uint32_t>(slot_bytes_);
    queued_items_.push_back(item);
    queued_.push_back({.id = seq.id(), .at = static_cast<size_t>(i)});
  }
}

void DaemonKvBlocks::EndStep() {
  ++step_;
  PublishQueued();
}

void DaemonKvBlocks::PublishQueued() {
  if (queued_items_.empty()) return;
  std::vector<protocol::WorkPublishItem> items = std::exchange(queued_items_, {});
  const std::vector<Queued> at = std::exchange(queued_, {});
  std::vector<uint32_t> slots(items.size());
  std::vector<uint64_t> sums(items.size());
  for (size_t j = 0; j < items.size(); ++j) slots[j] = items[j].slot;
  if (absl::Status s = Timed(stats_, KvCall::kChecksum, [&] { return Checksums(slots, sums); });
      !s.ok()) {
    Fail(s);
    return;
  }
  for (size_t j = 0; j < items.size(); ++j) items[j].checksum = sums[j];
  for (size_t begin = 0; begin < items.size(); begin += kMaxPerCall) {
    const size_t n = std::min(kMaxPerCall, items.size() - begin);
    ++stats_.publish_calls;
    absl::StatusOr<std::vector<BlockCode>> codes = Timed(stats_, KvCall::kPublish, [&] {
      return client_->PublishWorking(options_.tier, absl::MakeConstSpan(items).subspan(begin, n));
    });
    if (!codes.ok()) {
      Fail(codes.status());
      return;
    }
    for (size_t j = 0; j < n; ++j) {
      if ((*codes)[j] == BlockCode::kOk) {
        // A cached block now, leased to this client.
        states_.at(at[begin + j].id).holds[at[begin + j].at] = Hold::kLeased;
        ++stats_.published;
      } else if ((*codes)[j] == BlockCode::kAlreadyPresent) {
        ++stats_.already_present;  // stays this sequence's working slot
      }
    }
  }
}

absl::Status DaemonKvBlocks::Checksums(std::span<const uint32_t> slots, std::span<uint64_t> sums) {
  if (options_.checksum) return options_.checksum(slots, sums);
  for (size_t i = 0; i < slots.size(); ++i) {
    sums[i] = XXH3_64bits(client_->SlotData(slots[i]), slot_bytes_);
  }
  return absl::OkStatus();
}

void DaemonKvBlocks::Release(Sequence& seq) {
  PublishQueued();  // a step's blocks first (the scheduler ends its steps; this is for others)
  auto it = states_.find(seq.id());
  if (it != states_.end()) {
    State& st = it->second;
    std::vector<BlockKey> leased;
    std::vector<uint32_t> free;
    const std::vector<int32_t>& table = seq.block_table();
    for (size_t i = 0; i < st.holds.size() && i < table.size(); ++i) {
      if (st.holds[i] == Hold::kLeased) {
        leased.push_back(st.keys[i]);
      } else if (static_cast<int32_t>(reserve_.size()) < options_.reserve_max) {
        reserve_.push_back(static_cast<uint32_t>(table[i]));
      } else {
        free.push_back(static_cast<uint32_t>(table[i]));
      }
    }
    for (size_t i = 0; i < st.pending_slots.size(); ++i) leased.push_back(st.keys[i]);
    ReleaseKeys(leased);
    if (st.load_ticket != 0) loader_->Finish(st.load_ticket);
    if (loading_ == seq.id()) loading_ = 0;
    for (size_t at = 0; at < free.size(); at += kMaxPerCall) {
      const size_t n = std::min(kMaxPerCall, free.size() - at);
      const KvCallTimer timer(stats_, KvCall::kFree);
      absl::StatusOr<std::vector<BlockCode>> r =
          client_->FreeWorking(options_.tier, absl::MakeConstSpan(free).subspan(at, n));
      if (!r.ok()) Fail(r.status());
    }
    stats_.working_freed += static_cast<int64_t>(free.size());
    states_.erase(it);
  }
  if (pending_owner_ == seq.id()) pending_owner_ = 0;
  seq.mutable_block_table().clear();
  seq.ResetComputed();
}

}  // namespace kvtier::engine
