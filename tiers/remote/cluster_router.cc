#include "tiers/remote/cluster_router.h"

#include <fmt/format.h>
#include <hiredis.h>

#include <algorithm>
#include <array>
#include <tuple>

#include "common/log.h"

namespace kvtier {

struct ClusterRouter::Node {
  RespEndpoint endpoint;
  std::vector<std::unique_ptr<RespConnection>> idle;
  uint32_t failures = 0;       // consecutive failed connects
  Clock::time_point retry_at;  // no connect before this
  absl::Status last_error;     // of the last failed connect, repeated while backing off
  bool up = false;             // the last contact succeeded
};

struct ClusterRouter::Pending {
  size_t index = 0;    // into the requests of Execute
  uint32_t sends = 0;  // times sent so far
  int ask_node = -1;   // send to this node once, after ASKING (an ASK redirect)
};

namespace {

constexpr auto kRefreshInterval = std::chrono::milliseconds(100);

constexpr std::array<uint16_t, 256> MakeCrcTable() {
  std::array<uint16_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint16_t, 256> kCrcTable = MakeCrcTable();

const std::string& AskingCommand() {
  static const std::string* const command = new std::string(FormatCommand({"ASKING"}));
  return *command;
}

bool IsString(const redisReply* r) { return r != nullptr && r->type == REDIS_REPLY_STRING; }
bool IsIntegerIn(const redisReply* r, long long lo, long long hi) {
  return r != nullptr && r->type == REDIS_REPLY_INTEGER && r->integer >= lo && r->integer <= hi;
}

}  // namespace

uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char b : bytes) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrcTable[((crc >> 8) ^ b) & 0xff]);
  }
  return crc;
}

uint16_t KeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<uint16_t>(Crc16(key) & (kClusterSlots - 1));
}

ClusterRouter::ClusterRouter(ClusterRouterOptions options) : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  for (const RespEndpoint& seed : options_.seeds) NodeIdLocked(seed);
  slot_node_.assign(kClusterSlots, -1);
}

ClusterRouter::~ClusterRouter() = default;

size_t ClusterRouter::NodeIdLocked(const RespEndpoint& endpoint) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->endpoint == endpoint) return i;
  }
  nodes_.push_back(std::make_unique<Node>());
  nodes_.back()->endpoint = endpoint;
  return nodes_.size() - 1;
}

absl::Status ClusterRouter::EnsureTopology() {
  {
    absl::MutexLock lock(&mu_);
    if (options_.mode == ClusterMode::kStandalone) {
      resolved_ = true;
      return absl::OkStatus();
    }
    const Clock::time_point now = Clock::now();
    if (resolved_ && (!cluster_ || !stale_ || now < next_refresh_)) return absl::OkStatus();
    next_refresh_ = now + kRefreshInterval;
  }
  absl::Status status = Refresh();
  absl::MutexLock lock(&mu_);
  if (!status.ok()) ++counters_.map_refresh_failures;
  // With a map in hand, a failed refresh keeps the old one: its nodes answer MOVED if it is wrong.
  return resolved_ ? absl::OkStatus() : status;
}

absl::Status ClusterRouter::Refresh() {
  size_t count;
  {
    absl::MutexLock lock(&mu_);
    count = nodes_.size();
  }
  absl::Status last = absl::UnavailableError("remote: no node is known");
  for (size_t id = 0; id < count; ++id) {
    last = RefreshFrom(id);
    if (last.ok() || absl::IsFailedPrecondition(last)) return last;
  }
  return last;
}

absl::Status ClusterRouter::RefreshFrom(size_t node_id) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<RespConnection> connection, Lease(node_id));
  const RespEndpoint endpoint = connection->endpoint();
  absl::StatusOr<RespReply> reply = connection->Command({"CLUSTER", "SLOTS"});
  GiveBack(node_id, std::move(connection));
  if (!reply.ok()) {
    NodeDown(node_id);
    return reply.status();
  }
  const redisReply& r = **reply;
  if (r.type == REDIS_REPLY_ERROR &&
      std::string_view(r.str, r.len).find("cluster support disabled") != std::string_view::npos) {
    if (options_.mode == ClusterMode::kCluster) {
      return absl::FailedPreconditionError(
          fmt::format("remote {}: remote.cluster is true but this node is not in cluster mode",
                      endpoint.Name()));
    }
    absl::MutexLock lock(&mu_);
    resolved_ = true;
    cluster_ = false;
    standalone_node_ = node_id;
    return absl::OkStatus();
  }
  return InstallSlots(node_id, r);
}

// CLUSTER SLOTS: [[start, end, [host, port, id...], replicas...], ...]. Every element is checked.
absl::Status ClusterRouter::InstallSlots(size_t queried, const redisReply& reply) {
  RespEndpoint from;
  {
    absl::MutexLock lock(&mu_);
    from = nodes_[queried]->endpoint;
  }
  if (reply.type != REDIS_REPLY_ARRAY) {
    return UnexpectedReply(from, "CLUSTER SLOTS", reply, "an array of slot ranges");
  }
  std::vector<std::tuple<uint32_t, uint32_t, RespEndpoint>> ranges;
  for (size_t i = 0; i < reply.elements; ++i) {
    const redisReply* e = reply.element[i];
    const bool shape_ok = e != nullptr && e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
                          IsIntegerIn(e->element[0], 0, kClusterSlots - 1) &&
                          IsIntegerIn(e->element[1], e->element[0]->integer, kClusterSlots - 1) &&
                          e->element[2] != nullptr && e->element[2]->type == REDIS_REPLY_ARRAY &&
                          e->element[2]->elements >= 2 && IsString(e->element[2]->element[0]) &&
                          e->element[2]->element[0]->len <= 255 &&
                          IsIntegerIn(e->element[2]->element[1], 1, 65535);
    if (!shape_ok) {
      return UnexpectedReply(from, "CLUSTER SLOTS", e == nullptr ? reply : *e,
                             fmt::format("[start, end, [host, port, ...]] as entry {}", i));
    }
    const redisReply* master = e->element[2];
    std::string host(master->element[0]->str, master->element[0]->len);
    if (host.empty() || host == "?") host = from.host;  // "the node you asked", per Redis
    ranges.emplace_back(static_cast<uint32_t>(e->element[0]->integer),
                        static_cast<uint32_t>(e->element[1]->integer),
                        RespEndpoint{host, static_cast<uint16_t>(master->element[1]->integer)});
  }
  absl::MutexLock lock(&mu_);
  std::vector<int32_t> map(kClusterSlots, -1);
  for (const auto& [start, end, endpoint] : ranges) {
    const auto id = static_cast<int32_t>(NodeIdLocked(endpoint));
    std::fill(map.begin() + start, map.begin() + end + 1, id);
  }
  slot_node_ = std::move(map);
  resolved_ = true;
  cluster_ = true;
  stale_ = false;
  ++counters_.map_refreshes;
  return absl::OkStatus();
}

int ClusterRouter::NodeFor(const Pending& p, std::string_view key) const {
  if (p.ask_node >= 0) return p.ask_node;
  if (!cluster_) return static_cast<int>(standalone_node_);
  return slot_node_[KeySlot(key)];
}

void ClusterRouter::Execute(absl::Span<const RespRequest> requests, RespReplyFn on_reply) {
  if (requests.empty()) return;
  if (absl::Status status = EnsureTopology(); !status.ok()) {
    for (size_t i = 0; i < requests.size(); ++i) on_reply(i, status);
    return;
  }
  std::vector<Pending> pending(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) pending[i].index = i;
  while (!pending.empty()) {
    std::vector<std::vector<Pending>> by_node;
    std::vector<Pending> unrouted;
    {
      absl::ReaderMutexLock lock(&mu_);
      by_node.resize(nodes_.size());
      for (const Pending& p : pending) {
        const int node = NodeFor(p, requests[p.index].key);
        (node >= 0 ? by_node[static_cast<size_t>(node)] : unrouted).push_back(p);
      }
    }
    for (const Pending& p : unrouted) {
      on_reply(p.index, absl::UnavailableError(fmt::format(
                            "remote: {}: no node serves slot {} (the cluster map is incomplete)",
                            requests[p.index].name, KeySlot(requests[p.index].key))));
    }
    if (!unrouted.empty()) MarkStale();
    std::vector<Pending> again;
    for (size_t id = 0; id < by_node.size(); ++id) {
      absl::Span<Pending> group(by_node[id]);
      for (size_t at = 0; at < group.size(); at += options_.max_pipeline) {
        RunOnNode(id, group.subspan(at, options_.max_pipeline), requests, again, on_reply);
      }
    }
    pending = std::move(again);
    if (!pending.empty()) (void)EnsureTopology();  // after MOVED: the new map, rate-limited
  }
}

void ClusterRouter::RunOnNode(size_t node_id, absl::Span<Pending> batch,
                              absl::Span<const RespRequest> requests, std::vector<Pending>& again,
                              RespReplyFn on_reply) {
  absl::StatusOr<std::unique_ptr<RespConnection>> connection = Lease(node_id);
  if (!connection.ok()) {
    for (const Pending& p : batch) on_reply(p.index, connection.status());
    MarkStale();
    return;
  }
  RespConnection& c = **connection;
  for (Pending& p : batch) {
    if (p.ask_node >= 0) c.Append(AskingCommand());
    const RespRequest& r = requests[p.index];
    c.Append({r.command, r.payload, r.tail});
    ++p.sends;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Pending& p = batch[i];
    absl::StatusOr<RespReply> reply = RespReply();
    if (p.ask_node >= 0) reply = c.ReadReply("ASKING");  // its +OK is read and dropped
    const RespRequest& r = requests[p.index];
    if (reply.ok()) reply = r.sink != nullptr ? c.ReadBulk(r.name, *r.sink) : c.ReadReply(r.name);
    p.ask_node = -1;
    if (!reply.ok()) {
      // The stream is lost: this reply and every later one. A broken connection (perhaps a stale
      // pooled one) is worth one more try; a timeout is not (it would double the wait).
      for (Pending& q : batch.subspan(i)) {
        q.ask_node = -1;
        if (absl::IsUnavailable(reply.status()) && q.sends <= 1) {
          again.push_back(q);
        } else {
          on_reply(q.index, reply.status());
        }
      }
      NodeDown(node_id);
      MarkStale();
      break;
    }
    if (*reply != nullptr && (*reply)->type == REDIS_REPLY_ERROR &&
        HandleRedirect(**reply, c.endpoint(), p)) {
      if (p.sends <= options_.max_redirects) {
        again.push_back(p);
        continue;
      }
      on_reply(p.index, absl::AbortedError(fmt::format("remote {}: {}: more than {} redirects",
                                                       c.endpoint().Name(), requests[p.index].name,
                                                       options_.max_redirects)));
      continue;
    }
    on_reply(p.index, RespAnswer{reply->get(), &c.endpoint()});
  }
  GiveBack(node_id, std::move(*connection));
}

// "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>"; false for any other error reply.
bool ClusterRouter::HandleRedirect(const redisReply& reply, const RespEndpoint& from, Pending& p) {
  const std::string_view text(reply.str, reply.len);
  const bool moved = text.starts_with("MOVED ");
  if (!moved && !text.starts_with("ASK ")) return false;
  const std::string_view rest = text.substr(moved ? 6 : 4);
  const size_t space = rest.find(' ');
  uint32_t slot = 0;
  if (space == std::string_view::npos || !ParseDecimal(rest.substr(0, space), slot) ||
      slot >= kClusterSlots) {
    return false;
  }
  std::string_view target = rest.substr(space + 1);
  std::string host_port =
      target.starts_with(":") ? from.host + std::string(target) : std::string(target);
  absl::StatusOr<RespEndpoint> endpoint = ParseEndpoint(host_port, "redirect");
  if (!endpoint.ok()) return false;
  absl::MutexLock lock(&mu_);
  const auto id = static_cast<int32_t>(NodeIdLocked(*endpoint));
  if (moved) {
    slot_node_[slot] = id;
    stale_ = true;
    ++counters_.moved_redirects;
  } else {
    p.ask_node = id;
    ++counters_.ask_redirects;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<RespConnection>> ClusterRouter::Lease(size_t node_id) {
  RespEndpoint endpoint;
  {
    absl::MutexLock lock(&mu_);
    Node& n = *nodes_[node_id];
    if (!n.idle.empty()) {
      std::unique_ptr<RespConnection> c = std::move(n.idle.back());
      n.idle.pop_back();
      return c;
    }
    const Clock::time_point now = Clock::now();
    if (now < n.retry_at) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(n.retry_at - now);
      return absl::UnavailableError(fmt::format(
          "remote {}: not connecting again for {} ms after {} failed attempts (last: {})",
          n.endpoint.Name(), wait.count(), n.failures, std::string(n.last_error.message())));
    }
    endpoint = n.endpoint;
  }
  absl::StatusOr<std::unique_ptr<RespConnection>> c =
      RespConnection::Connect(endpoint, options_.connection);
  absl::MutexLock lock(&mu_);
  Node& n = *nodes_[node_id];
  n.up = c.ok();
  if (c.ok()) {
    n.failures = 0;
    ++counters_.connects;
    return c;
  }
  ++n.failures;
  ++counters_.connect_failures;
  const uint32_t shift = std::min<uint32_t>(n.failures - 1, 16);
  const uint64_t backoff = std::min<uint64_t>(uint64_t{options_.reconnect_backoff_min_ms} << shift,
                                              options_.reconnect_backoff_max_ms);
  n.retry_at = Clock::now() + std::chrono::milliseconds(backoff);
  n.last_error = c.status();
  return c;
}

void ClusterRouter::GiveBack(size_t node_id, std::unique_ptr<RespConnection> connection) {
  absl::MutexLock lock(&mu_);
  Node& n = *nodes_[node_id];
  if (connection->broken()) return;
  n.up = true;  // it answered
  if (n.idle.size() < options_.pool_per_node) n.idle.push_back(std::move(connection));
}

void ClusterRouter::MarkStale() {
  absl::MutexLock lock(&mu_);
  stale_ = true;
}

// A connection to the node broke: the others in its pool are likely dead too (a restarted or
// killed node), so they are dropped rather than each failing a batch of its own.
void ClusterRouter::NodeDown(size_t node_id) {
  std::vector<std::unique_ptr<RespConnection>> dropped;
  absl::MutexLock lock(&mu_);
  nodes_[node_id]->up = false;
  dropped.swap(nodes_[node_id]->idle);
}

RouterStats ClusterRouter::Stats() const {
  absl::MutexLock lock(&mu_);
  RouterStats s = counters_;
  s.cluster = cluster_;
  if (!cluster_) {
    s.nodes_serving = 1;
    s.nodes_up = nodes_[standalone_node_]->up ? 1 : 0;
    return s;
  }
  std::vector<bool> serving(nodes_.size(), false);
  for (int32_t id : slot_node_) {
    if (id >= 0) serving[static_cast<size_t>(id)] = true;
  }
  for (size_t id = 0; id < serving.size(); ++id) {
    if (!serving[id]) continue;
    ++s.nodes_serving;
    if (nodes_[id]->up) ++s.nodes_up;
  }
  return s;
}

}  // namespace kvtier
