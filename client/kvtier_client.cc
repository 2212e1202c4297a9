#include "client/kvtier_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "client/client_impl.h"
#include "common/checksum.h"

namespace kvtier::client {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;
using protocol::Op;

// Runs `each(offset, count)` over `total` keys in chunks of at most `max` keys.
template <typename F>
absl::Status Chunked(size_t total, size_t max, F each) {
  for (size_t off = 0; off < total; off += max) {
    KVTIER_RETURN_IF_ERROR(each(off, std::min(max, total - off)));
  }
  return absl::OkStatus();
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Connect(options));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<std::vector<BlockKey>> Client::KeysFor(absl::Span<const uint32_t> tokens,
                                                      const std::optional<BlockKey>& parent) const {
  const Namespace& ns = impl_->options.ns;
  if (ns.key_source != KeySource::kTokens) {
    return absl::FailedPreconditionError(fmt::format(
        "KeysFor: the namespace of model '{}' declares key_source = engine_hash, so its keys come "
        "from the engine's block hashes (KeysForEngineHashes), not from token ids",
        ns.model_id));
  }
  const size_t block = ns.block_tokens;
  std::vector<BlockKey> keys;
  keys.reserve(tokens.size() / block);
  BlockKey prev = parent.value_or(impl_->root);
  for (size_t off = 0; off + block <= tokens.size(); off += block) {
    prev = ChainTokenBlock(prev, tokens.subspan(off, block));
    keys.push_back(prev);
  }
  return keys;
}

absl::StatusOr<std::vector<BlockKey>> Client::KeysForEngineHashes(
    absl::Span<const uint64_t> hashes, const std::optional<BlockKey>& parent) const {
  const Namespace& ns = impl_->options.ns;
  if (ns.key_source != KeySource::kEngineHash) {
    return absl::FailedPreconditionError(fmt::format(
        "KeysForEngineHashes: the namespace of model '{}' declares key_source = tokens, so its "
        "keys come from token ids (KeysFor); declare key_source = engine_hash to pass the "
        "engine's block hashes",
        ns.model_id));
  }
  std::vector<BlockKey> keys;
  keys.reserve(hashes.size());
  BlockKey prev = parent.value_or(impl_->root);
  for (const uint64_t hash : hashes) {
    prev = ChainEngineHash(prev, hash);
    keys.push_back(prev);
  }
  return keys;
}

absl::Status Client::CheckPayloadBytes(const char* what, size_t index, const char* field,
                                       uint64_t bytes, Tier tier) const {
  const bool t0 = tier == Tier::kT0;
  const uint32_t slot = t0 ? impl_->welcome.t0_slot_bytes : impl_->welcome.t1_slot_bytes;
  if (bytes != 0 && bytes <= slot) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{}[{}]{} is {} bytes; a payload is 1 to {} bytes (kvtierd's {} slot_bytes)",
                  what, index, field, bytes, slot, t0 ? "T0" : "T1"));
}

absl::StatusOr<LookupResult> Client::Lookup(absl::Span<const BlockKey> keys) {
  absl::MutexLock lock(&impl_->mu);
  LookupResult out;
  out.tiers.resize(keys.size());
  std::vector<uint8_t> tiers;
  const size_t max = impl_->welcome.max_batch;
  // Chunk by chunk until the prefix ends inside one.
  for (size_t off = 0, n = 0; off < keys.size() && out.hit_blocks == off; off += n) {
    n = std::min(max, keys.size() - off);
    const Impl::Call call = Impl::KeysArgs(Op::kLookup, keys.subspan(off, n));
    protocol::Request sent;
    KVTIER_ASSIGN_OR_RETURN(protocol::Completion done, impl_->Do(call, &sent));
    KVTIER_RETURN_IF_ERROR(protocol::ReadLookupResult(impl_->region->arena(), sent, done, &tiers));
    std::copy_n(tiers.begin(), done.count, out.tiers.begin() + static_cast<ptrdiff_t>(off));
    out.hit_blocks += done.count;
  }
  out.tiers.resize(out.hit_blocks);
  return out;
}

namespace {

// One request whose answer is a BlockResult per item.
absl::StatusOr<std::vector<BlockResult>> BlockResultsCall(Client::Impl& impl,
                                                          const Client::Impl::Call& call)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
  return impl.DoBlockResults(call);
}

// `tier` is the tier a kGet reads from (ignored for other ops).
absl::StatusOr<std::vector<BlockResult>> KeysCall(Client::Impl& impl, Op op,
                                                  absl::Span<const BlockKey> keys,
                                                  Tier tier = Tier::kT1)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
  std::vector<BlockResult> out;
  const size_t max = impl.welcome.max_batch;
  for (size_t off = 0; off < keys.size(); off += max) {
    const Client::Impl::Call call =
        Client::Impl::KeysArgs(op, keys.subspan(off, std::min(max, keys.size() - off)),
                               op == Op::kGet ? static_cast<uint8_t>(tier) : uint8_t{0});
    KVTIER_ASSIGN_OR_RETURN(std::vector<BlockResult> part, BlockResultsCall(impl, call));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// Since version 3 a put_begin names the tier of its slots (T1 for Put).
absl::StatusOr<std::vector<BlockResult>> PutBeginCall(
    Client::Impl& impl, absl::Span<const protocol::PutBeginItem> items, Tier tier = Tier::kT1)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
  return BlockResultsCall(impl, {Op::kPutBegin, items.size(), static_cast<uint8_t>(tier),
                                 [&](protocol::ArenaView a, protocol::ArenaRange r) {
                                   protocol::WritePutBegin(a, r, items);
                                 }});
}

}  // namespace

absl::StatusOr<std::vector<BlockResult>> Client::Get(absl::Span<const BlockKey> keys) {
  return Get(keys, Tier::kT1);
}

absl::StatusOr<std::vector<BlockResult>> Client::Get(absl::Span<const BlockKey> keys, Tier tier) {
  if (tier == Tier::kT0 && impl_->welcome.t0_bytes == 0) {
    return absl::FailedPreconditionError("a get from T0, but kvtierd has no T0");
  }
  if (tier != Tier::kT0 && tier != Tier::kT1) {
    return absl::InvalidArgumentError(
        fmt::format("a get reads from T0 or T1, not {}", TierName(tier)));
  }
  absl::MutexLock lock(&impl_->mu);
  return KeysCall(*impl_, Op::kGet, keys, tier);
}

absl::StatusOr<std::vector<BlockResult>> Client::Release(absl::Span<const BlockKey> keys) {
  absl::MutexLock lock(&impl_->mu);
  return KeysCall(*impl_, Op::kRelease, keys);
}

absl::StatusOr<std::vector<BlockResult>> Client::Drop(absl::Span<const BlockKey> keys) {
  absl::MutexLock lock(&impl_->mu);
  return KeysCall(*impl_, Op::kDrop, keys);
}

absl::StatusOr<size_t> Client::GetInto(absl::Span<const BlockKey> keys,
                                       absl::Span<const absl::Span<std::byte>> destinations) {
  if (destinations.size() < keys.size()) {
    return absl::InvalidArgumentError("GetInto: fewer destinations than keys");
  }
  // The leases keep the slots this call's while it copies, without holding the connection: other
  // threads' requests go on meanwhile.
  KVTIER_ASSIGN_OR_RETURN(std::vector<BlockResult> got, Get(keys));
  size_t copied = 0;
  std::vector<BlockKey> leased;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].code != static_cast<uint32_t>(BlockCode::kOk)) continue;
    leased.push_back(keys[i]);
    if (copied != i || destinations[i].size() < got[i].payload_bytes) continue;
    std::memcpy(destinations[i].data(), SlotData(got[i].slot), got[i].payload_bytes);
    ++copied;
  }
  KVTIER_RETURN_IF_ERROR(Release(leased).status());
  return copied;
}

absl::StatusOr<std::vector<BlockCode>> Client::Put(
    absl::Span<const BlockKey> keys, absl::Span<const absl::Span<const std::byte>> payloads,
    const std::optional<BlockKey>& parent) {
  if (payloads.size() != keys.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "Put: {} keys but {} payloads (one payload per key)", keys.size(), payloads.size()));
  }
  // Every size is checked before anything is sent or copied: a payload larger than a slot would
  // overrun it into other blocks, and one the daemon refuses would cost the connection.
  for (size_t i = 0; i < payloads.size(); ++i) {
    KVTIER_RETURN_IF_ERROR(CheckPayloadBytes("Put: payloads", i, "", payloads[i].size()));
  }
  std::vector<protocol::PutBeginItem> begin(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::optional<BlockKey> p = i == 0 ? parent : std::optional<BlockKey>(keys[i - 1]);
    // <= slot_bytes (a uint32_t), checked above.
    begin[i] = protocol::PutBeginItem{keys[i], p, static_cast<uint32_t>(payloads[i].size())};
  }
  std::vector<BlockCode> codes(keys.size(), BlockCode::kFailed);
  const absl::Status chunked =
      (Chunked(keys.size(), impl_->welcome.max_batch, [&](size_t off, size_t n) {
        return PutChunk(absl::MakeConstSpan(begin).subspan(off, n), payloads.subspan(off, n),
                        absl::MakeSpan(codes).subspan(off, n));
      }));
  if (!chunked.ok()) return chunked;
  return codes;
}

absl::StatusOr<std::vector<BlockResult>> Client::PutBegin(
    absl::Span<const protocol::PutBeginItem> items, Tier tier) {
  KVTIER_RETURN_IF_ERROR(CheckSlotTier("PutBegin", tier));
  if (items.empty()) return std::vector<BlockResult>();
  for (size_t i = 0; i < items.size(); ++i) {
    KVTIER_RETURN_IF_ERROR(
        CheckPayloadBytes("PutBegin: items", i, ".payload_bytes", items[i].payload_bytes, tier));
  }
  absl::MutexLock lock(&impl_->mu);
  return PutBeginCall(*impl_, items, tier);
}

absl::StatusOr<std::vector<BlockResult>> Client::PutCommit(
    absl::Span<const protocol::PutCommitItem> items) {
  if (items.empty()) return std::vector<BlockResult>();
  absl::MutexLock lock(&impl_->mu);
  return BlockResultsCall(
      *impl_, {Op::kPutCommit, items.size(), 0, [&](protocol::ArenaView a, protocol::ArenaRange r) {
                 protocol::WritePutCommit(a, r, items);
               }});
}

namespace {

// Commits of one put chunk, sent while the chunk is still being copied: each group of about
// kCommitGroupBytes of payload is committed as soon as its blocks are in their slots, so the
// daemon verifies (and publishes) one group while this thread copies the next, instead of the
// copies and the daemon's pass over the same bytes taking turns. Small blocks still go in one
// commit per chunk. Every call names the connection, whose mu the caller holds throughout: the
// requests in flight own parts of its arena.
class CommitPipeline {
 public:
  static constexpr uint64_t kCommitGroupBytes = 1u << 20;
  static constexpr uint32_t kMaxInFlight = 16;  // well under any ring (no ring can fill up)

  CommitPipeline(Client::Impl& impl, absl::Span<BlockCode> codes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu)
      : codes_(codes),
        max_in_flight_(std::min({kMaxInFlight, impl.region->layout().sq_entries / 2,
                                 impl.region->layout().cq_entries / 2})) {}

  // Block `index` of the chunk is in its slot; `bytes` of payload.
  absl::Status Add(Client::Impl& impl, size_t index, const protocol::PutCommitItem& item,
                   uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
    group_.push_back(item);
    group_index_.push_back(index);
    group_bytes_ += bytes;
    return group_bytes_ >= kCommitGroupBytes ? Send(impl) : absl::OkStatus();
  }

  // Sends what is left and waits for every commit; codes[i] of each committed block is then the
  // daemon's answer.
  absl::Status Finish(Client::Impl& impl) ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
    KVTIER_RETURN_IF_ERROR(Send(impl));
    return Drain(impl);
  }

 private:
  struct InFlight {
    protocol::Request sent;
    std::vector<size_t> index;  // chunk positions of its items
  };

  absl::Status Send(Client::Impl& impl) ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
    if (group_.empty()) return absl::OkStatus();
    const Client::Impl::Call call{Op::kPutCommit, group_.size(), 0,
                                  [this](protocol::ArenaView a, protocol::ArenaRange r) {
                                    protocol::WritePutCommit(a, r, group_);
                                  }};
    const uint32_t need = Client::Impl::ArenaBytes(call);
    if (arena_used_ + uint64_t{need} > impl.region->arena().bytes ||
        in_flight_.size() >= max_in_flight_) {
      KVTIER_RETURN_IF_ERROR(Drain(impl));
    }
    InFlight f{{}, std::move(group_index_)};
    KVTIER_RETURN_IF_ERROR(impl.Submit(call, arena_used_, &f.sent));
    arena_used_ += need;
    in_flight_.push_back(std::move(f));
    group_.clear();
    group_index_.clear();
    group_bytes_ = 0;
    return absl::OkStatus();
  }

  absl::Status Drain(Client::Impl& impl) ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
    const protocol::SessionLimits limits = impl.limits();
    std::vector<BlockResult> done;
    for (const InFlight& f : in_flight_) {
      KVTIER_ASSIGN_OR_RETURN(protocol::Completion c, impl.Finish(f.sent));
      KVTIER_RETURN_IF_ERROR(
          protocol::ReadBlockResults(impl.region->arena(), f.sent, c, limits, &done));
      for (size_t j = 0; j < f.index.size(); ++j) {
        codes_[f.index[j]] = static_cast<BlockCode>(done[j].code);
      }
    }
    in_flight_.clear();
    arena_used_ = 0;
    return absl::OkStatus();
  }

  const absl::Span<BlockCode> codes_;
  const uint32_t max_in_flight_;
  std::vector<protocol::PutCommitItem> group_;  // copied, not yet sent
  std::vector<size_t> group_index_;
  uint64_t group_bytes_ = 0;
  std::vector<InFlight> in_flight_;  // sent, in order
  uint32_t arena_used_ = 0;          // by the requests in flight, from offset 0
};

// A key named twice in one put_begin gets a slot once, for its first occurrence; the daemon
// answers the later ones kAlreadyPresent (docs/protocol.md "Repeated keys"). Should that first
// one then fail to be published, the later ones are not present either: they take its outcome.
void SettleRepeatedKeys(absl::Span<const protocol::PutBeginItem> items,
                        absl::Span<const BlockResult> begun, absl::Span<BlockCode> codes) {
  const auto is = [](const BlockResult& r, BlockCode c) {
    return r.code == static_cast<uint32_t>(c);
  };
  if (std::none_of(begun.begin(), begun.end(),
                   [&](const BlockResult& r) { return is(r, BlockCode::kAlreadyPresent); })) {
    return;
  }
  absl::flat_hash_map<BlockKey, size_t> written;  // key -> the item that got its slot
  for (size_t i = 0; i < items.size(); ++i) {
    if (is(begun[i], BlockCode::kOk)) written.emplace(items[i].key, i);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const auto it = written.find(items[i].key);
    if (!is(begun[i], BlockCode::kAlreadyPresent) || it == written.end() || it->second > i) {
      continue;
    }
    const BlockCode first = codes[it->second];
    if (first != BlockCode::kOk && first != BlockCode::kAlreadyPresent) codes[i] = first;
  }
}

}  // namespace

absl::Status Client::PutChunk(absl::Span<const protocol::PutBeginItem> items,
                              absl::Span<const absl::Span<const std::byte>> payloads,
                              absl::Span<BlockCode> codes) {
  absl::MutexLock lock(&impl_->mu);  // from put_begin to the last commit's answer
  KVTIER_ASSIGN_OR_RETURN(std::vector<BlockResult> slots, PutBeginCall(*impl_, items));
  CommitPipeline commits(*impl_, codes);
  for (size_t i = 0; i < items.size(); ++i) {
    codes[i] = static_cast<BlockCode>(slots[i].code);
    if (codes[i] != BlockCode::kOk) continue;
    // The slot is as large as payload_bytes, which is payloads[i].size() (Put checked it fits).
    const uint64_t sum =
        CopyAndChecksum(MutableSlotData(slots[i].slot), payloads[i].data(), payloads[i].size());
    KVTIER_RETURN_IF_ERROR(commits.Add(*impl_, i, {items[i].key, sum}, payloads[i].size()));
  }
  KVTIER_RETURN_IF_ERROR(commits.Finish(*impl_));
  SettleRepeatedKeys(items, slots, codes);
  return absl::OkStatus();
}

absl::StatusOr<protocol::StatsWire> Client::Stats() {
  absl::MutexLock lock(&impl_->mu);
  protocol::Request sent;
  KVTIER_ASSIGN_OR_RETURN(protocol::Completion done, impl_->Do({Op::kStats, 0, 0, nullptr}, &sent));
  return protocol::ReadStats(impl_->region->arena(), sent, done);
}

absl::Status Client::Nop() {
  absl::MutexLock lock(&impl_->mu);
  protocol::Request sent;
  return impl_->Do({Op::kNop, 0, 0, nullptr}, &sent).status();
}

const std::byte* Client::SlotData(uint32_t slot) const {
  if (slot >= impl_->welcome.t1_slots) return nullptr;
  return impl_->t1 + uint64_t{slot} * impl_->welcome.t1_slot_bytes;
}
std::byte* Client::MutableSlotData(uint32_t slot) {
  if (slot >= impl_->welcome.t1_slots) return nullptr;
  return impl_->t1 + uint64_t{slot} * impl_->welcome.t1_slot_bytes;
}
uint32_t Client::slot_bytes() const { return impl_->welcome.t1_slot_bytes; }
std::byte* Client::t1_base() const { return impl_->t1; }
uint64_t Client::t1_bytes() const { return impl_->welcome.t1_bytes; }
uint64_t Client::session_id() const { return impl_->welcome.session_id; }

std::optional<T0Info> Client::t0() const {
  const protocol::Welcome& w = impl_->welcome;
  if (w.t0_bytes == 0) return std::nullopt;
  return T0Info{w.t0_bytes, w.t0_slot_bytes, w.t0_slots, w.t0_pci_bus_id, w.t0_ipc_handle};
}

}  // namespace kvtier::client
