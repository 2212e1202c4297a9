#include "tests/tiers/remote/redis_test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace kvtier::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool OnPath(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

// Binds 127.0.0.1:port (0: any) and returns the port bound, or 0. The socket is closed at once.
uint16_t TryBind(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof(addr);
  uint16_t bound = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  ::close(fd);
  return bound;
}

std::string ReplyText(const redisReply& r) {
  return std::string(r.str == nullptr ? "" : r.str, r.len);
}

absl::StatusOr<std::string> TextCommand(RespConnection& c, std::vector<std::string_view> args) {
  KVTIER_ASSIGN_OR_RETURN(RespReply reply, c.Command(args));
  if (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS) {
    return absl::InternalError(fmt::format("{}: {}", args[0], DescribeReply(*reply)));
  }
  return ReplyText(*reply);
}

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

// A store killed mid-write must be an error value, not a signal (as in kvtierd, which ignores it).
const bool kSigpipeIgnored = (::signal(SIGPIPE, SIG_IGN), true);

}  // namespace

std::string RedisSkipReason() {
  if (!OnPath("redis-server")) return "redis-server is not on PATH (tools/setup.sh installs it)";
  if (!OnPath("redis-cli")) return "redis-cli is not on PATH (tools/setup.sh installs redis-tools)";
  return "";
}

uint16_t PickRedisPort() {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint16_t port = TryBind(0);
    if (port != 0 && port < 55000 && TryBind(static_cast<uint16_t>(port + 10000)) != 0) {
      return port;
    }
  }
  return 0;
}

RedisTempDir::RedisTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/kvtier-redis-XXXXXX";
  if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

RedisTempDir::~RedisTempDir() {
  std::error_code ignored;
  if (!path_.empty()) fs::remove_all(path_, ignored);
}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(const std::string& dir,
                                                                std::vector<std::string> config,
                                                                uint16_t port) {
  if (port == 0) port = PickRedisPort();
  std::error_code error;
  fs::create_directories(dir, error);
  const std::string conf = dir + "/redis.conf";
  {
    std::ofstream out(conf);
    out << "port " << port << "\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\n"
        << "dir " << dir << "\nlogfile " << dir << "/redis.log\nsave \"\"\nappendonly no\n";
    for (const std::string& line : config) out << line << "\n";
    if (!out) return absl::InternalError("cannot write " + conf);
  }
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a test that crashed
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execlp("redis-server", "redis-server", conf.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::unique_ptr<RedisServer> server(new RedisServer(dir, port, pid));
  KVTIER_RETURN_IF_ERROR(server->WaitReady(std::chrono::seconds(60)));
  return server;
}

absl::Status RedisServer::WaitReady(std::chrono::seconds deadline) {
  const Clock::time_point end = Clock::now() + deadline;
  while (Clock::now() < end) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return absl::InternalError(
          fmt::format("redis-server on port {} exited: {}", port_, LogTail()));
    }
    RespConnectionOptions options;
    options.connect_timeout_ms = 500;
    auto c = RespConnection::Connect(endpoint(), options);
    if (c.ok()) {
      auto reply = (*c)->Command({"PING"});
      const bool loading = reply.ok() && (*reply)->type == REDIS_REPLY_ERROR &&
                           ReplyText(**reply).starts_with("LOADING");
      if (reply.ok() && !loading) return absl::OkStatus();  // PONG, or NOAUTH under ACLs
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      fmt::format("redis-server on port {} did not answer: {}", port_, LogTail()));
}

RedisServer::~RedisServer() { Kill(); }

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = 0;
}

void RedisServer::Pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

absl::StatusOr<std::unique_ptr<RespConnection>> RedisServer::Connect(
    const std::string& user, const std::string& password) const {
  RespConnectionOptions options;
  options.user = user;
  options.password = password;
  options.command_timeout_ms = 10000;
  return RespConnection::Connect(endpoint(), options);
}

std::string RedisServer::LogTail() const {
  std::ifstream in(dir_ + "/redis.log");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > 8 ? lines.size() - 8 : 0; i < lines.size(); ++i) {
    out += "\n  " + lines[i];
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(const std::string& dir) {
  auto cluster = std::unique_ptr<RedisCluster>(new RedisCluster());
  for (int i = 0; i < 6; ++i) {
    KVTIER_ASSIGN_OR_RETURN(
        auto server,
        RedisServer::Start(fmt::format("{}/node{}", dir, i),
                           {"cluster-enabled yes", "cluster-config-file nodes.conf",
                            "cluster-node-timeout 1000", "cluster-require-full-coverage no"}));
    cluster->servers_.push_back(std::move(server));
  }
  std::string command = "redis-cli --cluster create";
  for (const std::string& a : cluster->addresses()) command += " " + a;
  command += " --cluster-replicas 1 --cluster-yes > " + dir + "/create.log 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::ifstream in(dir + "/create.log");
    std::stringstream text;
    text << in.rdbuf();
    return absl::InternalError("redis-cli --cluster create failed:\n" + text.str());
  }
  KVTIER_RETURN_IF_ERROR(cluster->WaitHealthy(std::chrono::seconds(120)));
  return cluster;
}

std::vector<std::string> RedisCluster::addresses() const {
  std::vector<std::string> out;
  for (const auto& s : servers_) out.push_back(s->address());
  return out;
}

absl::StatusOr<size_t> RedisCluster::MasterOf(uint32_t slot) const {
  for (const auto& s : servers_) {
    if (!s->running()) continue;
    auto c = s->Connect();
    if (!c.ok()) continue;
    auto reply = (*c)->Command({"CLUSTER", "SLOTS"});
    if (!reply.ok() || (*reply)->type != REDIS_REPLY_ARRAY) continue;
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      const redisReply* e = (*reply)->element[i];
      if (e->element[0]->integer > slot || e->element[1]->integer < slot) continue;
      const auto port = static_cast<uint16_t>(e->element[2]->element[1]->integer);
      for (size_t j = 0; j < servers_.size(); ++j) {
        if (servers_[j]->port() == port) return j;
      }
    }
  }
  return absl::NotFoundError(fmt::format("no live node names a master for slot {}", slot));
}

absl::Status RedisCluster::WaitHealthy(std::chrono::seconds deadline) const {
  const Clock::time_point end = Clock::now() + deadline;
  std::string why;
  while (Clock::now() < end) {
    why.clear();
    std::set<uint16_t> live;
    for (const auto& s : servers_) {
      if (s->running()) live.insert(s->port());
    }
    for (const auto& s : servers_) {
      if (!s->running() || !why.empty()) continue;
      auto c = s->Connect();
      if (!c.ok()) {
        why = std::string(c.status().message());
        continue;
      }
      auto info = TextCommand(**c, {"CLUSTER", "INFO"});
      auto repl = TextCommand(**c, {"INFO", "replication"});
      auto slots = (*c)->Command({"CLUSTER", "SLOTS"});
      if (!info.ok() || info->find("cluster_state:ok") == std::string::npos) {
        why = s->address() + ": cluster_state not ok";
      } else if (!repl.ok() || (repl->find("role:slave") != std::string::npos &&
                                repl->find("master_link_status:up") == std::string::npos)) {
        why = s->address() + ": replica not in sync";
      } else if (!slots.ok() || (*slots)->type != REDIS_REPLY_ARRAY) {
        why = s->address() + ": no CLUSTER SLOTS";
      } else {
        long long covered = 0;
        for (size_t i = 0; i < (*slots)->elements; ++i) {
          const redisReply* e = (*slots)->element[i];
          const auto port = static_cast<uint16_t>(e->element[2]->element[1]->integer);
          if (live.count(port) != 0) covered += e->element[1]->integer - e->element[0]->integer + 1;
        }
        if (covered != 16384)
          why = s->address() + fmt::format(": {} slots on live masters", covered);
      }
    }
    if (why.empty()) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError("the cluster did not become healthy: " + why);
}

void FillPattern(const BlockKey& key, void* dst, size_t bytes) {
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t state = Mix(key.lo ^ Mix(key.hi) ^ bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    state = Mix(state + 0x9e3779b97f4a7c15ULL);
    std::memcpy(out + i, &state, std::min<size_t>(8, bytes - i));
  }
}

bool MatchesPattern(const BlockKey& key, const void* data, size_t bytes) {
  std::vector<uint8_t> want(bytes);
  FillPattern(key, want.data(), bytes);
  return std::memcmp(want.data(), data, bytes) == 0;
}

}  // namespace kvtier::testing
