// Real redis-server processes for the remote tier's tests: standalone servers and a 3-master,
// 3-replica Redis Cluster made by `redis-cli --cluster create`, each on loopback ports picked free
// by binding (redis cannot listen on port 0), in its own temporary directory, stopped (SIGKILL) and
// removed when the object dies. Tests skip with RedisSkipReason() when redis-server is not on PATH.
//
// Thread-safety: none; the test's main thread drives these.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "index/block_key.h"
#include "tiers/remote/resp_connection.h"

namespace kvtier::testing {

// Empty when redis-server and redis-cli are on PATH; else why the test cannot run.
std::string RedisSkipReason();

// A free loopback port p such that p + 10000 (a cluster node's bus port) is free too.
uint16_t PickRedisPort();

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it by the destructor.
class RedisTempDir {
 public:
  RedisTempDir();
  ~RedisTempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class RedisServer {
 public:
  // Starts redis-server on `port` (0: PickRedisPort()) with its files in `dir` (created) and the
  // extra config lines given (e.g. "maxmemory 8mb"); returns once it answers PING.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(const std::string& dir,
                                                            std::vector<std::string> config,
                                                            uint16_t port = 0);
  ~RedisServer();

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  RespEndpoint endpoint() const { return RespEndpoint{"127.0.0.1", port_}; }
  bool running() const { return pid_ > 0; }
  // SIGKILL and reap: the process dies at once, as in a crash.
  void Kill();
  // SIGSTOP / SIGCONT: a store that hangs (connections stay open, nothing answers), and recovers.
  void Pause();
  void Resume();
  // A connection for raw commands (as the default user; `password` for AUTH when set).
  absl::StatusOr<std::unique_ptr<RespConnection>> Connect(const std::string& user = "",
                                                          const std::string& password = "") const;
  // The last lines of its log, for failure messages.
  std::string LogTail() const;

 private:
  RedisServer(std::string dir, uint16_t port, pid_t pid) : dir_(dir), port_(port), pid_(pid) {}
  absl::Status WaitReady(std::chrono::seconds deadline);

  std::string dir_;
  uint16_t port_;
  pid_t pid_;
};

// Six cluster-enabled servers (cluster-node-timeout 1000) joined into 3 masters with 1 replica
// each.
class RedisCluster {
 public:
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start(const std::string& dir);

  std::vector<std::string> addresses() const;
  RedisServer& server(size_t i) { return *servers_[i]; }
  size_t size() const { return servers_.size(); }
  // The index of the server that is master of `slot` now, asked of a live node.
  absl::StatusOr<size_t> MasterOf(uint32_t slot) const;
  // Waits until every live node says cluster_state:ok and the masters of all 16384 slots (per
  // CLUSTER SLOTS of a live node) are live servers.
  absl::Status WaitHealthy(std::chrono::seconds deadline) const;

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

// Deterministic payload bytes for a key, so any reader can check every byte it got.
void FillPattern(const BlockKey& key, void* dst, size_t bytes);
bool MatchesPattern(const BlockKey& key, const void* data, size_t bytes);

}  // namespace kvtier::testing
