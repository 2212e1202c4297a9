#include "tiers/remote/remote_store.h"

#include <fmt/format.h>
#include <hiredis.h>

#include <chrono>
#include <cstring>

#include "common/checksum.h"
#include "common/log.h"
#include "tiers/remote/remote_value.h"

namespace kvtier {

// The counting half of RemoteStoreStats, bumped from any thread (relaxed: statistics).
class RemoteStore::Counters {
 public:
  using U64 = std::atomic<uint64_t>;
  U64 get_items{0}, hits{0}, misses{0}, corrupt{0}, oversize{0};
  U64 put_items{0}, stored{0}, exists_items{0}, exists_found{0}, delete_items{0};
  U64 bytes_read{0}, bytes_written{0};
  U64 timeout{0}, connection{0}, protocol{0}, auth{0}, server{0}, bad_put{0};

  static void Add(U64& counter, uint64_t n = 1) { counter.fetch_add(n, std::memory_order_relaxed); }

  void Error(const absl::Status& s) {
    switch (s.code()) {
      case absl::StatusCode::kDeadlineExceeded:
        return Add(timeout);
      case absl::StatusCode::kUnavailable:
        return Add(connection);
      case absl::StatusCode::kUnauthenticated:
        return Add(auth);
      case absl::StatusCode::kAborted:
        return Add(server);
      case absl::StatusCode::kDataLoss:
        return Add(bad_put);
      default:
        return Add(protocol);
    }
  }

  struct Histogram {
    std::array<U64, RemoteLatency::kBoundsSeconds.size() + 1> buckets{};
    U64 count{0}, sum_ns{0};
  };
  std::array<Histogram, 4> latency;  // by Op

  void Observe(Op op, std::chrono::nanoseconds took) {
    Histogram& h = latency[static_cast<size_t>(op)];
    const double s = std::chrono::duration<double>(took).count();
    size_t b = 0;
    while (b < RemoteLatency::kBoundsSeconds.size() && s > RemoteLatency::kBoundsSeconds[b]) ++b;
    Add(h.buckets[b]);
    Add(h.count);
    Add(h.sum_ns, static_cast<uint64_t>(took.count()));
  }

  RemoteLatency Latency(Op op) const {
    const Histogram& h = latency[static_cast<size_t>(op)];
    RemoteLatency out;
    for (size_t b = 0; b < out.buckets.size(); ++b) out.buckets[b] = h.buckets[b].load();
    out.count = h.count.load();
    out.sum_seconds = static_cast<double>(h.sum_ns.load()) * 1e-9;
    return out;
  }
};

namespace {

constexpr size_t kKeyBytes = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteStore>> RemoteStore::Open(const RemoteStoreOptions& options) {
  KVTIER_RETURN_IF_ERROR(options.Validate());
  KVTIER_ASSIGN_OR_RETURN(ClusterRouterOptions router, options.RouterOptions());
  return std::unique_ptr<RemoteStore>(new RemoteStore(options, std::move(router)));
}

RemoteStore::RemoteStore(const RemoteStoreOptions& options, ClusterRouterOptions router)
    : key_prefix_(options.key_prefix),
      verify_puts_(options.verify_puts),
      put_slice_(size_t{options.max_pipeline} * 4),
      router_(std::move(router)),
      breaker_(CircuitBreaker::Options{options.breaker_failures, options.breaker_open_ms,
                                       options.breaker_open_max_ms}),
      counters_(std::make_unique<Counters>()) {}

RemoteStore::~RemoteStore() = default;

std::string RemoteStore::StoreKey(const BlockKey& key) const {
  const std::array<uint8_t, kKeyBytes> bytes = key.Bytes();
  std::string out = key_prefix_;
  out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return out;
}

absl::Status RemoteStore::Run(Op op, absl::Span<const RespRequest> requests,
                              absl::FunctionRef<absl::Status(size_t, const RespAnswer&)> on_reply) {
  if (requests.empty()) return absl::OkStatus();
  if (!breaker_.Allow()) {
    return absl::UnavailableError(
        "remote store unavailable: the circuit breaker is open after repeated failures (it "
        "probes the store again by itself)");
  }
  const auto start = std::chrono::steady_clock::now();
  absl::Status first;
  size_t answered = 0;
  router_.Execute(requests, [&](size_t i, const absl::StatusOr<RespAnswer>& answer) {
    const absl::Status s = answer.ok() ? on_reply(i, *answer) : answer.status();
    if (s.ok()) {
      ++answered;
      return;
    }
    counters_->Error(s);
    if (first.ok()) first = s;
  });
  counters_->Observe(op, std::chrono::steady_clock::now() - start);
  // A call counts against the store only when nothing in it was answered: a cluster with one
  // node down still serves the rest (that node fails fast through its own reconnect back-off).
  if (answered == 0 && !first.ok()) {
    breaker_.Failure(first);
  } else {
    breaker_.Success();
  }
  return first;
}

absl::Status RemoteStore::Put(absl::Span<RemotePutItem> items) {
  absl::Status first;
  for (size_t at = 0; at < items.size(); at += put_slice_) {
    absl::Status s = PutSlice(items.subspan(at, put_slice_));
    if (first.ok()) first = s;
  }
  return first;
}

// The SET of one item: "*3 $3 SET $<k> key $<v>" and the value's header, in `head`; the payload
// is sent from the caller's buffer. NotOk (DataLoss) when verify_puts finds a wrong checksum.
absl::Status RemoteStore::FormatSet(const RemotePutItem& item, const std::string& key,
                                    std::string& head) const {
  BlockRecord record = item.record;
  if (record.checksum == 0 || verify_puts_) {
    record.checksum = PayloadChecksum(item.payload, record.payload_bytes);
    if (item.record.checksum != 0 && item.record.checksum != record.checksum) {
      return absl::DataLossError(fmt::format(
          "remote: put of {}: the payload does not match its checksum ({:016x}, given {:016x}); "
          "not stored",
          record.key.ToHex(), record.checksum, item.record.checksum));
    }
  }
  AppendCommandHeader(head, 3);
  AppendBulk(head, "SET");
  AppendBulk(head, key);
  AppendBulkHeader(head, kRemoteHeaderBytes + record.payload_bytes);
  const size_t at = head.size();
  head.resize(at + kRemoteHeaderBytes);
  EncodeRemoteHeader(record, reinterpret_cast<uint8_t*>(head.data() + at));
  return absl::OkStatus();
}

absl::Status RemoteStore::PutSlice(absl::Span<RemotePutItem> items) {
  Counters::Add(counters_->put_items, items.size());
  std::vector<std::string> keys(items.size()), heads(items.size());
  std::vector<RespRequest> requests;
  std::vector<size_t> item_of;  // [request] item index
  absl::Status first;
  for (size_t i = 0; i < items.size(); ++i) {
    RemotePutItem& item = items[i];
    item.outcome = RemoteOutcome::kError;
    keys[i] = StoreKey(item.record.key);
    if (absl::Status bad = FormatSet(item, keys[i], heads[i]); !bad.ok()) {
      counters_->Error(bad);
      if (first.ok()) first = bad;
      continue;
    }
    const std::string_view payload(static_cast<const char*>(item.payload),
                                   item.record.payload_bytes);
    requests.push_back(RespRequest{keys[i], heads[i], "SET", payload, "\r\n"});
    item_of.push_back(i);
  }
  absl::Status sent = Run(Op::kPut, requests, [&](size_t r, const RespAnswer& answer) {
    RemotePutItem& item = items[item_of[r]];
    KVTIER_RETURN_IF_ERROR(ExpectOk(*answer.node, "SET", *answer.reply));
    item.outcome = RemoteOutcome::kHit;
    Counters::Add(counters_->stored);
    Counters::Add(counters_->bytes_written, item.record.payload_bytes);
    return absl::OkStatus();
  });
  return first.ok() ? sent : first;
}

// Where a GET's value goes (resp_connection.h BulkSink): its header into `header`, its payload
// straight into the item's dst when it fits (else nowhere: the bytes are dropped and the value is
// judged by its header alone).
class RemoteStore::GetSink final : public BulkSink {
 public:
  absl::Span<const iovec> Place(size_t len) override {
    value_bytes_ = len;
    payload_placed_ = false;
    iov_[0] = iovec{header_.data(), std::min(len, header_.size())};
    if (len < kRemoteHeaderBytes || len - kRemoteHeaderBytes > dst_bytes_) return {iov_, 1};
    payload_placed_ = true;
    iov_[1] = iovec{dst_, len - kRemoteHeaderBytes};
    return {iov_, 2};
  }

  void Target(void* dst, uint32_t dst_bytes) {
    dst_ = dst;
    dst_bytes_ = dst_bytes;
  }
  std::string_view header() const {
    return {reinterpret_cast<const char*>(header_.data()), std::min(value_bytes_, header_.size())};
  }
  uint64_t value_bytes() const { return value_bytes_; }
  bool payload_placed() const { return payload_placed_; }

 private:
  void* dst_ = nullptr;
  uint32_t dst_bytes_ = 0;
  std::array<uint8_t, kRemoteHeaderBytes> header_{};
  iovec iov_[2] = {};
  uint64_t value_bytes_ = 0;
  bool payload_placed_ = false;
};

absl::Status RemoteStore::Get(absl::Span<RemoteGetItem> items) {
  Counters::Add(counters_->get_items, items.size());
  std::vector<std::string> keys(items.size()), commands(items.size());
  std::vector<GetSink> sinks(items.size());
  std::vector<RespRequest> requests(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    items[i].outcome = RemoteOutcome::kError;
    keys[i] = StoreKey(items[i].key);
    commands[i] = FormatCommand({"GET", keys[i]});
    sinks[i].Target(items[i].dst, items[i].dst_bytes);
    requests[i] = RespRequest{keys[i], commands[i], "GET"};
    requests[i].sink = &sinks[i];
  }
  return Run(Op::kGet, requests, [&](size_t i, const RespAnswer& answer) {
    return OnGetReply(items[i], sinks[i], answer);
  });
}

// A hit only for a value whose header names this key and namespace and whose payload, now in
// item.dst, hashes to the header's checksum; a miss (counted) for nil, a bad or an oversize value.
absl::Status RemoteStore::OnGetReply(RemoteGetItem& item, const GetSink& sink,
                                     const RespAnswer& answer) {
  if (answer.reply != nullptr && answer.reply->type != REDIS_REPLY_NIL) {
    return UnexpectedReply(*answer.node, "GET", *answer.reply, "a bulk string or nil");
  }
  item.outcome = RemoteOutcome::kMiss;
  if (answer.reply != nullptr) {  // nil: not in the store
    Counters::Add(counters_->misses);
    return absl::OkStatus();
  }
  absl::StatusOr<BlockRecord> record =
      DecodeRemoteHeader(sink.header(), sink.value_bytes(), item.key, item.namespace_id);
  if (!record.ok()) {
    Corrupt(item, *answer.node, record.status());
    return absl::OkStatus();
  }
  if (!sink.payload_placed()) {  // a valid value larger than dst_bytes
    Counters::Add(counters_->misses);
    Counters::Add(counters_->oversize);
    return absl::OkStatus();
  }
  const uint64_t sum = PayloadChecksum(item.dst, record->payload_bytes);
  if (sum != record->checksum) {
    Corrupt(item, *answer.node,
            absl::DataLossError(fmt::format("payload checksum {:016x}, header says {:016x}", sum,
                                            record->checksum)));
    return absl::OkStatus();
  }
  item.outcome = RemoteOutcome::kHit;
  item.record = *record;
  Counters::Add(counters_->hits);
  Counters::Add(counters_->bytes_read, record->payload_bytes);
  return absl::OkStatus();
}

void RemoteStore::Corrupt(const RemoteGetItem& item, const RespEndpoint& node,
                          const absl::Status& why) {
  Counters::Add(counters_->misses);
  const uint64_t n = counters_->corrupt.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n <= 10 || n % 1000 == 0) {  // a store full of bad values must not flood the log
    KVTIER_LOG(kWarn, "remote", "remote {}: block {}: corrupt value, not served ({}; {} so far)",
               node.Name(), item.key.ToHex(), std::string(why.message()), n);
  }
}

absl::Status RemoteStore::Exists(absl::Span<const BlockKey> keys,
                                 absl::Span<RemoteOutcome> present) {
  if (present.size() != keys.size()) {
    return absl::InvalidArgumentError(fmt::format("remote: Exists: {} keys but room for {} answers",
                                                  keys.size(), present.size()));
  }
  Counters::Add(counters_->exists_items, keys.size());
  std::vector<std::string> store_keys(keys.size()), commands(keys.size());
  std::vector<RespRequest> requests(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    present[i] = RemoteOutcome::kError;
    store_keys[i] = StoreKey(keys[i]);
    commands[i] = FormatCommand({"EXISTS", store_keys[i]});
    requests[i] = RespRequest{store_keys[i], commands[i], "EXISTS"};
  }
  return Run(Op::kExists, requests, [&](size_t i, const RespAnswer& answer) {
    KVTIER_ASSIGN_OR_RETURN(int64_t n, ExpectInteger(*answer.node, "EXISTS", *answer.reply, 0, 1));
    present[i] = n == 1 ? RemoteOutcome::kHit : RemoteOutcome::kMiss;
    if (n == 1) Counters::Add(counters_->exists_found);
    return absl::OkStatus();
  });
}

absl::Status RemoteStore::Probe(absl::Span<const BlockKey> keys, absl::Span<RemoteOutcome> present,
                                absl::Span<uint32_t> payload_bytes) {
  if (present.size() != keys.size() || payload_bytes.size() != keys.size()) {
    return absl::InvalidArgumentError(
        fmt::format("remote: Probe: {} keys but room for {} answers and {} sizes", keys.size(),
                    present.size(), payload_bytes.size()));
  }
  Counters::Add(counters_->exists_items, keys.size());
  std::vector<std::string> store_keys(keys.size()), commands(keys.size());
  std::vector<RespRequest> requests(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    present[i] = RemoteOutcome::kError;
    payload_bytes[i] = 0;
    store_keys[i] = StoreKey(keys[i]);
    commands[i] = FormatCommand({"STRLEN", store_keys[i]});
    requests[i] = RespRequest{store_keys[i], commands[i], "STRLEN"};
  }
  return Run(Op::kExists, requests, [&](size_t i, const RespAnswer& answer) {
    KVTIER_ASSIGN_OR_RETURN(int64_t n,
                            ExpectInteger(*answer.node, "STRLEN", *answer.reply, 0, INT64_MAX));
    const uint64_t bytes = static_cast<uint64_t>(n);
    const bool value = bytes > kRemoteHeaderBytes && bytes - kRemoteHeaderBytes <= UINT32_MAX;
    present[i] = value ? RemoteOutcome::kHit : RemoteOutcome::kMiss;
    if (value) {
      payload_bytes[i] = static_cast<uint32_t>(bytes - kRemoteHeaderBytes);
      Counters::Add(counters_->exists_found);
    }
    return absl::OkStatus();
  });
}

absl::Status RemoteStore::Delete(absl::Span<const BlockKey> keys) {
  Counters::Add(counters_->delete_items, keys.size());
  std::vector<std::string> store_keys(keys.size()), commands(keys.size());
  std::vector<RespRequest> requests(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    store_keys[i] = StoreKey(keys[i]);
    commands[i] = FormatCommand({"DEL", store_keys[i]});
    requests[i] = RespRequest{store_keys[i], commands[i], "DEL"};
  }
  return Run(Op::kDelete, requests, [&](size_t, const RespAnswer& answer) {
    return ExpectInteger(*answer.node, "DEL", *answer.reply, 0, 1).status();
  });
}

uint64_t RemoteStore::corrupt_values() const {
  return counters_->corrupt.load(std::memory_order_relaxed);
}

RemoteStoreStats RemoteStore::Stats() const {
  const Counters& c = *counters_;
  RemoteStoreStats s;
  s.get_items = c.get_items.load();
  s.hits = c.hits.load();
  s.misses = c.misses.load();
  s.corrupt_values = c.corrupt.load();
  s.oversize_values = c.oversize.load();
  s.put_items = c.put_items.load();
  s.stored = c.stored.load();
  s.exists_items = c.exists_items.load();
  s.exists_found = c.exists_found.load();
  s.delete_items = c.delete_items.load();
  s.bytes_read = c.bytes_read.load();
  s.bytes_written = c.bytes_written.load();
  s.errors_timeout = c.timeout.load();
  s.errors_connection = c.connection.load();
  s.errors_protocol = c.protocol.load();
  s.errors_auth = c.auth.load();
  s.errors_server = c.server.load();
  s.errors_bad_put = c.bad_put.load();
  s.breaker = breaker_.GetStats();
  s.router = router_.Stats();
  s.get_latency = c.Latency(Op::kGet);
  s.put_latency = c.Latency(Op::kPut);
  s.exists_latency = c.Latency(Op::kExists);
  s.delete_latency = c.Latency(Op::kDelete);
  return s;
}

}  // namespace kvtier
