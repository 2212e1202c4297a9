// Routes key-addressed commands to the node of a Redis-protocol store that serves each key: one
// standalone node, or the masters of a Redis Cluster (DESIGN.md "The remote tier": no home-made
// cluster protocol; this speaks Redis Cluster's own).
//
// Cluster routing. A key's slot is CRC16-XMODEM(key) mod 16384, or of the text between the first
// '{' and the next '}' when that is non-empty (a hash tag), exactly as Redis's keyHashSlot. The
// slot map comes from CLUSTER SLOTS, asked of any known node; it is refreshed (at most every
// 100 ms) after a MOVED reply, a broken connection or a slot no node serves. MOVED updates that
// slot at once and the command is sent again to the new owner; ASK sends ASKING and then the
// command to the named node, once, without changing the map. A command is sent at most
// 1 + max_redirects times.
//
// Connections. Each node has a pool: at most pool_per_node idle connections are kept; a caller
// takes one for a batch and gives it back, so concurrent callers never share one (a burst of more
// callers than that opens more, closed when given back). A connection that broke is dropped, and
// the node's idle ones with it (a killed or restarted node leaves them all dead). A node whose
// connect failed is not connected to again before an exponential back-off (reconnect_backoff_min_ms
// doubling up to reconnect_backoff_max_ms); until then its commands fail at once with Unavailable.
// A successful connect resets the back-off.
//
// Mode. kStandalone sends everything to seeds[0]; kCluster requires the nodes to be in cluster
// mode; kAuto asks CLUSTER SLOTS of the seeds at first use and chooses standalone if the node
// answers that cluster support is disabled. Nothing connects before the first Execute, so a store
// that is down at start costs nothing until it is used.
//
// Thread-safety: every method may be called from any thread at once. Execute blocks its caller on
// network I/O, for at most about (rounds x command_timeout_ms) plus connect timeouts.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "tiers/remote/resp_connection.h"

namespace kvtier {

inline constexpr uint32_t kClusterSlots = 16384;

// Redis's keyHashSlot: CRC16-XMODEM of the key (or of its non-empty {hash tag}) mod 16384.
uint16_t KeySlot(std::string_view key);
// CRC16-XMODEM (poly 0x1021, init 0, no reflection): Crc16("123456789") == 0x31C3.
uint16_t Crc16(std::string_view bytes);

enum class ClusterMode { kStandalone, kCluster, kAuto };

struct ClusterRouterOptions {
  std::vector<RespEndpoint> seeds;  // at least one
  ClusterMode mode = ClusterMode::kAuto;
  RespConnectionOptions connection;
  uint32_t pool_per_node = 4;  // idle connections kept per node, >= 1
  uint32_t max_pipeline = 16;  // commands sent to one connection before reading their replies
  uint32_t reconnect_backoff_min_ms = 100;
  uint32_t reconnect_backoff_max_ms = 5000;
  uint32_t max_redirects = 5;
};

// One command of a batch. The views must stay valid until Execute returns.
struct RespRequest {
  std::string_view key;  // routes the command (its cluster slot)
  // The RESP-formatted command (FormatCommand) is command ‖ payload ‖ tail; payload and tail may
  // be empty. Split so a SET's value is sent from the caller's buffer, never copied.
  std::string_view command;
  std::string_view name;  // the command's name for errors, e.g. "GET"
  std::string_view payload = {};
  std::string_view tail = {};
  // When set, the reply is read with RespConnection::ReadBulk: a bulk string goes to the sink
  // (a GET's value into the caller's buffer) and its answer carries no reply.
  BulkSink* sink = nullptr;
};

// A request's final reply (any reply, error replies other than redirects included) and the node
// that gave it (for errors that name it). Valid only during the RespReplyFn call.
struct RespAnswer {
  // Null only for a request with a sink whose reply was a bulk string: its bytes are in the sink.
  const redisReply* reply = nullptr;
  const RespEndpoint* node = nullptr;
};
// Gets each request's answer or the error that kept it from one (resp_connection.h lists the
// codes).
using RespReplyFn = absl::FunctionRef<void(size_t index, const absl::StatusOr<RespAnswer>& answer)>;

struct RouterStats {
  uint64_t moved_redirects = 0;
  uint64_t ask_redirects = 0;
  uint64_t map_refreshes = 0;         // slot maps loaded
  uint64_t map_refresh_failures = 0;  // refreshes that reached no node
  uint64_t connects = 0;              // connections opened
  uint64_t connect_failures = 0;      // connects refused, timed out, or AUTH refused
  uint32_t nodes_serving = 0;         // nodes the map sends keys to (1 when standalone)
  uint32_t nodes_up = 0;              // of those, the ones whose last contact succeeded
  bool cluster = false;               // the mode found (false also before the first contact)
};

class ClusterRouter {
 public:
  explicit ClusterRouter(ClusterRouterOptions options);
  ~ClusterRouter();
  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;

  // Sends every request to its node (pipelined, up to max_pipeline per connection and round),
  // follows redirects, and calls `on_reply` exactly once per request, in no particular order,
  // before returning. Requests for different keys may go to different nodes.
  void Execute(absl::Span<const RespRequest> requests, RespReplyFn on_reply);

  RouterStats Stats() const;

 private:
  struct Node;
  struct Pending;
  using Clock = std::chrono::steady_clock;

  absl::Status EnsureTopology();
  absl::Status Refresh();
  absl::Status RefreshFrom(size_t node_id);
  absl::Status InstallSlots(size_t queried, const redisReply& reply);
  int NodeFor(const Pending& p, std::string_view key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  size_t NodeIdLocked(const RespEndpoint& endpoint) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunOnNode(size_t node_id, absl::Span<Pending> batch, absl::Span<const RespRequest> requests,
                 std::vector<Pending>& again, RespReplyFn on_reply);
  bool HandleRedirect(const redisReply& reply, const RespEndpoint& from, Pending& p);
  absl::StatusOr<std::unique_ptr<RespConnection>> Lease(size_t node_id);
  void GiveBack(size_t node_id, std::unique_ptr<RespConnection> connection);
  void MarkStale();
  void NodeDown(size_t node_id);

  const ClusterRouterOptions options_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Node>> nodes_ ABSL_GUARDED_BY(mu_);  // never shrinks; index = id
  std::vector<int32_t> slot_node_ ABSL_GUARDED_BY(mu_);            // [slot] node id, -1 none
  bool resolved_ ABSL_GUARDED_BY(mu_) = false;  // mode known (first contact made)
  bool cluster_ ABSL_GUARDED_BY(mu_) = false;
  size_t standalone_node_ ABSL_GUARDED_BY(mu_) = 0;  // the node that answered, when standalone
  bool stale_ ABSL_GUARDED_BY(mu_) = false;          // refresh the slot map at the next chance
  Clock::time_point next_refresh_ ABSL_GUARDED_BY(mu_);
  RouterStats counters_ ABSL_GUARDED_BY(mu_);  // the counting fields only
};

}  // namespace kvtier
