#include "tools/bench/bench_worker.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "client/kvtier_client.h"

namespace kvtier::bench {
namespace {

using client::Client;
using protocol::BlockCode;
using protocol::BlockResult;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Is(uint32_t code, BlockCode want) { return code == static_cast<uint32_t>(want); }

// One worker's state: the connection, its key stream, its buffers.
class Worker {
 public:
  Worker(const WorkerContext& c, WorkerResult* r)
      : c_(c),
        o_(*c.options),
        r_(r),
        picker_(o_.space, c.zipf, c.worker, o_.workers()),
        next_request_(c.worker) {}

  absl::Status Setup();
  void Run(int64_t go_ns);

 private:
  absl::Status Prefault();
  void StampPayloads(size_t n);
  bool NextKeys();  // keys_ for the next op; false when the trace has no more for us
  void WaitForArrival(int64_t go_ns) const;
  void Step();
  size_t Lookup(absl::Span<const BlockKey> keys);
  void LookupMany();  // o_.depth lookups in one call: keys_ and depth - 1 more draws
  void Get(absl::Span<const BlockKey> keys);
  void Put(absl::Span<const BlockKey> keys, const std::optional<BlockKey>& parent);
  template <typename F>
  auto Timed(BenchOp op, F call);
  OpStats& Stats(BenchOp op) { return r_->op[static_cast<int>(op)]; }

  const WorkerContext& c_;
  const BenchOptions& o_;
  WorkerResult* r_;
  SequencePicker picker_;
  size_t next_request_;  // trace mode: the next request index this worker replays
  size_t request_ = 0;   // trace mode: the request keys_ came from
  std::unique_ptr<Client> client_;
  std::vector<BlockKey> keys_;
  std::vector<std::vector<BlockKey>> many_;  // LookupMany's sequences
  std::vector<absl::Span<const BlockKey>> many_spans_;
  // Up to kPayloadBlocks distinct blocks of random bytes that puts store (block i of a put uses
  // block i % payload_blocks_), stamped afresh before each put (StampPayloads).
  static constexpr size_t kPayloadBlocks = 16;
  std::vector<std::byte> payload_;
  size_t payload_blocks_ = 0;  // as many as this worker's puts carry keys, at most kPayloadBlocks
  uint32_t bytes_ = 0;         // per block
  uint64_t stamp_ = 0;
  std::vector<std::byte> sink_;  // where gets copy to (one block, reused)
  std::vector<absl::Span<const std::byte>> payloads_;
};

template <typename F>
auto Worker::Timed(BenchOp op, F call) {
  const int64_t start = NowNs();
  auto result = call();
  OpStats& s = Stats(op);
  s.latency.Record(static_cast<uint64_t>(NowNs() - start));
  ++s.ops;
  if (!result.ok()) ++s.errors;
  return result;
}

absl::Status Worker::Setup() {
  client::ClientOptions options;
  options.socket_path = o_.socket_path;
  options.ns.model_id = o_.model_id;
  options.client_name = fmt::format("kvtier-bench-{}", c_.worker);
  options.spin_us = o_.spin_us;
  KVTIER_ASSIGN_OR_RETURN(client_, Client::Connect(options));
  const uint32_t bytes = o_.payload_bytes ? o_.payload_bytes : client_->slot_bytes();
  if (bytes > client_->slot_bytes()) {
    return absl::InvalidArgumentError(
        fmt::format("--payload-bytes {} is larger than the daemon's T1 slot ({} bytes)", bytes,
                    client_->slot_bytes()));
  }
  r_->payload_bytes = bytes_ = bytes;
  const bool puts = o_.fill || o_.op == BenchOp::kPut || o_.op == BenchOp::kMixed;
  payload_blocks_ = !puts      ? 0
                    : c_.trace ? kPayloadBlocks
                               : std::min<size_t>(kPayloadBlocks, o_.keys);
  payload_.resize(size_t{bytes} * payload_blocks_);
  synth::Rng rng(c_.worker + 1);
  for (size_t i = 0; i + 8 <= payload_.size(); i += 8) {
    const uint64_t v = rng.Bits();
    std::memcpy(payload_.data() + i, &v, 8);
  }
  stamp_ = uint64_t{c_.worker} << 48;
  sink_.resize(bytes);
  if (o_.prefault) KVTIER_RETURN_IF_ERROR(Prefault());
  if (o_.fill) {
    for (uint64_t s = c_.worker; s < o_.space.sequences; s += o_.workers()) {
      ChainKeys(o_.space.seed, s, o_.keys, &keys_);
      StampPayloads(keys_.size());
      KVTIER_RETURN_IF_ERROR(client_->Put(keys_, payloads_).status());
    }
  }
  return absl::OkStatus();
}

// The client maps T1 without MAP_POPULATE, so the first touch of each 4 KiB page in this process
// takes a page fault (the daemon already allocated it): 512 per 2 MiB slot. MADV_POPULATE_WRITE
// maps every page writable without changing a byte, so the timed phase sees copies only.
absl::Status Worker::Prefault() {
  KVTIER_ASSIGN_OR_RETURN(const protocol::StatsWire stats, client_->Stats());
  auto* base = const_cast<std::byte*>(client_->SlotData(0));
  const size_t length = size_t{stats.t1_slots_total} * client_->slot_bytes();
  if (::madvise(base, length, MADV_POPULATE_WRITE) != 0) {
    return absl::InternalError(
        fmt::format("--prefault: madvise(MADV_POPULATE_WRITE): {}", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Gives every 4 KiB page of the next put's n payloads a stamp never used before, so that no two
// stored pages are equal: a kernel or hypervisor merging equal pages (or a compressing memory
// system) would otherwise make T1 look faster than memory. Not timed.
void Worker::StampPayloads(size_t n) {
  payloads_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::byte* block = payload_.data() + (i % payload_blocks_) * bytes_;
    for (size_t off = 0; off < bytes_; off += 4096) {
      const uint64_t v = ++stamp_;
      std::memcpy(block + off, &v, std::min<size_t>(8, bytes_ - off));
    }
    payloads_[i] = absl::Span<const std::byte>(block, bytes_);
  }
}

bool Worker::NextKeys() {
  if (c_.trace == nullptr) {
    ChainKeys(o_.space.seed, picker_.Next(), o_.keys, &keys_);
    return true;
  }
  const replay::Trace& t = *c_.trace;
  if (next_request_ >= t.num_requests()) return false;
  request_ = next_request_;
  next_request_ += o_.workers();
  keys_.clear();
  for (uint64_t i = t.request_begin[request_]; i < t.request_begin[request_ + 1]; ++i) {
    keys_.push_back(BenchKey(o_.space.seed, t.hash_ids[t.refs[i]], 0));
  }
  return true;
}

size_t Worker::Lookup(absl::Span<const BlockKey> keys) {
  auto found = Timed(BenchOp::kLookup, [&] { return client_->Lookup(keys); });
  OpStats& s = Stats(BenchOp::kLookup);
  s.keys += keys.size();
  if (!found.ok()) return 0;
  s.hit_keys += found->hit_blocks;
  return found->hit_blocks;
}

// Counts each of the depth lookups as an op; the latency recorded is the whole call's.
void Worker::LookupMany() {
  many_.resize(o_.depth);
  many_spans_.resize(o_.depth);
  many_[0] = keys_;
  for (size_t i = 1; i < many_.size(); ++i) {
    ChainKeys(o_.space.seed, picker_.Next(), o_.keys, &many_[i]);
  }
  for (size_t i = 0; i < many_.size(); ++i) many_spans_[i] = many_[i];
  auto found = Timed(BenchOp::kLookup, [&] { return client_->LookupMany(many_spans_); });
  OpStats& s = Stats(BenchOp::kLookup);
  s.ops += o_.depth - 1;
  s.keys += uint64_t{o_.depth} * o_.keys;
  if (!found.ok()) return;
  for (const client::LookupResult& r : *found) s.hit_keys += r.hit_blocks;
}

// Lease, copy every block found out of T1, release: what GetInto does, counting every block.
void Worker::Get(absl::Span<const BlockKey> keys) {
  OpStats& s = Stats(BenchOp::kGet);
  s.keys += keys.size();
  const int64_t start = NowNs();
  absl::StatusOr<std::vector<BlockResult>> got = client_->Get(keys);
  absl::Status status = got.status();
  if (got.ok()) {
    std::vector<BlockKey> leased;
    for (size_t i = 0; i < got->size(); ++i) {
      const BlockResult& b = (*got)[i];
      if (!Is(b.code, BlockCode::kOk)) continue;
      std::memcpy(sink_.data(), client_->SlotData(b.slot),
                  std::min<size_t>(b.payload_bytes, sink_.size()));
      leased.push_back(keys[i]);
      s.bytes += b.payload_bytes;
    }
    s.hit_keys += leased.size();
    if (!leased.empty()) status = client_->Release(leased).status();
  }
  s.latency.Record(static_cast<uint64_t>(NowNs() - start));
  ++s.ops;
  if (!status.ok()) ++s.errors;
}

void Worker::Put(absl::Span<const BlockKey> keys, const std::optional<BlockKey>& parent) {
  StampPayloads(keys.size());
  auto codes = Timed(BenchOp::kPut, [&] { return client_->Put(keys, payloads_, parent); });
  OpStats& s = Stats(BenchOp::kPut);
  s.keys += keys.size();
  if (!codes.ok()) return;
  for (BlockCode code : *codes) {
    if (code == BlockCode::kOk) ++s.hit_keys, s.bytes += bytes_;
    if (code == BlockCode::kRetryLater) ++s.retries;
  }
}

void Worker::Step() {
  switch (o_.op) {
    case BenchOp::kLookup:
      if (o_.depth > 1) return LookupMany();
      Lookup(keys_);
      return;
    case BenchOp::kGet:
      Get(keys_);
      return;
    case BenchOp::kPut:
      Put(keys_, std::nullopt);
      return;
    case BenchOp::kNop:
      Timed(BenchOp::kNop, [&] { return client_->Nop(); }).IgnoreError();  // counted by Timed
      return;
    case BenchOp::kMixed:
      break;
  }
  const absl::Span<const BlockKey> keys(keys_);
  const size_t hit = Lookup(keys);
  if (hit > 0) Get(keys.subspan(0, hit));
  if (hit < keys.size()) {
    Put(keys.subspan(hit), hit > 0 ? std::optional<BlockKey>(keys[hit - 1]) : std::nullopt);
  }
}

void Worker::WaitForArrival(int64_t go_ns) const {
  if (c_.trace == nullptr || o_.speed <= 0) return;
  const double at_ms = c_.trace->timestamp_ms[request_] - c_.trace->timestamp_ms[0];
  const int64_t due = go_ns + static_cast<int64_t>(at_ms * 1e6 / o_.speed);
  const int64_t wait = due - NowNs();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
}

void Worker::Run(int64_t go_ns) {
  const int64_t deadline = go_ns + static_cast<int64_t>(o_.duration_s * 1e9);
  for (uint64_t done = 0; o_.ops > 0 ? done < o_.ops : NowNs() < deadline; ++done) {
    if (!NextKeys()) break;
    if (!keys_.empty()) {
      WaitForArrival(go_ns);
      Step();
    }
  }
  r_->end_ns = NowNs();
}

}  // namespace

void OpStats::Merge(const OpStats& other) {
  ops += other.ops;
  keys += other.keys;
  hit_keys += other.hit_keys;
  bytes += other.bytes;
  retries += other.retries;
  errors += other.errors;
  latency.Merge(other.latency);
}

void RunWorker(const WorkerContext& context, StartGate* gate, WorkerResult* result) {
  Worker worker(context, result);
  const absl::Status setup = worker.Setup();
  if (!setup.ok()) {
    std::snprintf(result->error, sizeof(result->error), "worker %u: %s", context.worker,
                  std::string(setup.message()).c_str());
  }
  gate->ready.fetch_add(1);
  int64_t go_ns = 0;
  while ((go_ns = gate->go_ns.load()) == 0 && gate->abort.load() == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (setup.ok() && go_ns != 0) worker.Run(go_ns);
}

}  // namespace kvtier::bench
