#include "tiers/remote/remote_store_options.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/log.h"

namespace kvtier {
namespace {

// The problems of one Validate, one a line; the status code is the first problem's.
class Problems {
 public:
  void Add(const absl::Status& status) {
    if (status.ok()) return;
    if (lines_.empty()) code_ = status.code();
    lines_.emplace_back(status.message());
  }
  void Check(bool ok, std::string line) {
    if (!ok) Add(absl::InvalidArgumentError(line));
  }
  absl::Status Result() const {
    if (lines_.empty()) return absl::OkStatus();
    return absl::Status(code_, fmt::format("{}", fmt::join(lines_, "\n")));
  }

 private:
  absl::StatusCode code_ = absl::StatusCode::kOk;
  std::vector<std::string> lines_;
};

void CheckRange(Problems& p, std::string_view key, uint64_t value, uint64_t lo, uint64_t hi) {
  p.Check(value >= lo && value <= hi,
          fmt::format("remote.{}: {} is not in [{}, {}]", key, value, lo, hi));
}

absl::StatusOr<std::string> ReadPasswordFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(fmt::format("remote.password_file: {}: cannot be read: {}",
                                           log::EscapeForLog(path), std::strerror(errno)));
  }
  std::string password;
  std::getline(in, password);
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("remote.password_file: {}: the first line is empty", log::EscapeForLog(path)));
  }
  return password;
}

void ValidateNodes(Problems& p, const RemoteStoreOptions& o) {
  p.Check(!o.nodes.empty(), "remote.nodes: at least one host:port is needed");
  p.Check(o.cluster != ClusterMode::kStandalone || o.nodes.size() <= 1,
          fmt::format("remote.nodes: a standalone store (remote.cluster = false) takes one node, "
                      "not {}",
                      o.nodes.size()));
  for (size_t i = 0; i < o.nodes.size(); ++i) {
    const std::string setting = fmt::format("remote.nodes[{}]", i);
    p.Add(ParseEndpoint(o.nodes[i], setting).status());
    for (size_t j = 0; j < i; ++j) {
      p.Check(o.nodes[j] != o.nodes[i], fmt::format("{}: same as remote.nodes[{}]", setting, j));
    }
  }
}

void ValidateAuth(Problems& p, const RemoteStoreOptions& o) {
  p.Check(o.password.empty() || o.password_file.empty(),
          "remote.password_file: set together with remote.password; give one of the two");
  p.Check(o.user.empty() || !o.password.empty() || !o.password_file.empty(),
          "remote.user: set without remote.password or remote.password_file");
  if (!o.password_file.empty()) p.Add(ReadPasswordFile(o.password_file).status());
}

}  // namespace

absl::Status RemoteStoreOptions::Validate() const {
  Problems p;
  ValidateNodes(p, *this);
  ValidateAuth(p, *this);
  CheckRange(p, "connect_timeout_ms", connect_timeout_ms, 1, 600000);
  CheckRange(p, "command_timeout_ms", command_timeout_ms, 1, 600000);
  CheckRange(p, "pool_per_node", pool_per_node, 1, 1024);
  CheckRange(p, "max_pipeline", max_pipeline, 1, 4096);
  CheckRange(p, "reconnect_backoff_min_ms", reconnect_backoff_min_ms, 1, 3600000);
  CheckRange(p, "reconnect_backoff_max_ms", reconnect_backoff_max_ms, reconnect_backoff_min_ms,
             3600000);
  CheckRange(p, "breaker_failures", breaker_failures, 1, 1000000);
  CheckRange(p, "breaker_open_ms", breaker_open_ms, 1, 3600000);
  CheckRange(p, "breaker_open_max_ms", breaker_open_max_ms, breaker_open_ms, 3600000);
  p.Check(key_prefix.size() <= 64,
          fmt::format("remote.key_prefix: {} bytes; at most 64", key_prefix.size()));
  p.Check(key_prefix.find_first_of("{}") == std::string::npos,
          fmt::format("remote.key_prefix: \"{}\" holds '{{' or '}}', a hash tag that would put "
                      "every key in one cluster slot",
                      log::EscapeForLog(key_prefix)));
  return p.Result();
}

absl::StatusOr<ClusterRouterOptions> RemoteStoreOptions::RouterOptions() const {
  ClusterRouterOptions r;
  for (size_t i = 0; i < nodes.size(); ++i) {
    KVTIER_ASSIGN_OR_RETURN(RespEndpoint e,
                            ParseEndpoint(nodes[i], fmt::format("remote.nodes[{}]", i)));
    r.seeds.push_back(std::move(e));
  }
  r.mode = cluster;
  r.connection.connect_timeout_ms = connect_timeout_ms;
  r.connection.command_timeout_ms = command_timeout_ms;
  r.connection.user = user;
  r.connection.password = password;
  if (!password_file.empty()) {
    KVTIER_ASSIGN_OR_RETURN(r.connection.password, ReadPasswordFile(password_file));
  }
  r.pool_per_node = pool_per_node;
  r.max_pipeline = max_pipeline;
  r.reconnect_backoff_min_ms = reconnect_backoff_min_ms;
  r.reconnect_backoff_max_ms = reconnect_backoff_max_ms;
  return r;
}

}  // namespace kvtier
