// Test helper: a real kvtierd process (the binary at KVTIER_DAEMON_PATH, set by CMake) serving on
// a temporary directory. The environment variables KVTIER_DAEMON and KVTIER_DAEMON_CONFIG, when
// set, name the binary and its base config instead (a bundle run on another host:
// tools/remote_bench_bundle.sh). Start spawns it with posix_spawn, its stdout and stderr going to a
// log file, and returns once it logged "kvtierd ready"; Stop sends a signal and reaps it. The log
// is what failure messages show (Log()).
//
// Layout of `dir`: data/ (daemon.data_directory, kept across restarts), kvtierd.sock
// (daemon.socket_path), kvtierd-<n>.log (the n-th start's log).
//
// Waits are for conditions (the ready line, the process's exit) with generous hang guards, never
// sleeps standing in for an assertion: a loaded 2-core CI machine under ASan is slow, not wrong.
//
// Thread-safety: none; one test thread drives it. Fork client processes before it starts threads
// of its own (it starts none).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/status.h"
#include "tests/daemon/config_test_util.h"

extern char** environ;

namespace kvtier::testing {

inline constexpr auto kDaemonReadyGuard = std::chrono::seconds(120);
inline constexpr auto kDaemonExitGuard = std::chrono::seconds(120);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to 0 and let go).
inline int PickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// How a process ended, for messages: "exit 0", "signal 9".
inline std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// $name when set and not empty, else `fallback`.
inline std::string FromEnv(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

class KvtierdProcess {
 public:
  // `flags` come after the fixed ones (--config, data directory, socket), so they override them.
  // `metrics_port` 0 turns the endpoint off; a port taken by someone else meanwhile fails the
  // start with the daemon's bind error in the message.
  static absl::StatusOr<std::unique_ptr<KvtierdProcess>> Start(
      const std::string& dir, const std::vector<std::string>& flags, int metrics_port = 0) {
    static int starts = 0;
    std::unique_ptr<KvtierdProcess> p(new KvtierdProcess);
    p->socket_path_ = dir + "/kvtierd.sock";
    p->log_path_ = dir + "/kvtierd-" + std::to_string(++starts) + ".log";
    std::vector<std::string> args = {
        FromEnv("KVTIER_DAEMON", KVTIER_DAEMON_PATH),
        "--config",
        FromEnv("KVTIER_DAEMON_CONFIG", KVTIER_SOURCE_DIR "/configs/default.toml"),
        "--daemon.data_directory",
        dir + "/data",
        "--daemon.socket_path",
        p->socket_path_,
        "--metrics.enabled",
        metrics_port != 0 ? "true" : "false"};
    if (metrics_port != 0) {
      args.push_back("--metrics.listen_address");
      args.push_back("127.0.0.1:" + std::to_string(metrics_port));
    }
    args.insert(args.end(), flags.begin(), flags.end());
    KVTIER_RETURN_IF_ERROR(p->Spawn(args));
    KVTIER_RETURN_IF_ERROR(p->AwaitReady());
    return p;
  }

  // A daemon still running is killed (SIGKILL) and reaped.
  ~KvtierdProcess() {
    if (pid_ > 0) (void)Stop(SIGKILL);
  }

  // Sends `signo` and waits for the process to end; its wait status. A daemon that outlives the
  // hang guard is killed, and the status says so (never equal to a clean exit).
  int Stop(int signo = SIGTERM) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, signo);
    int status = 0;
    if (!WaitFor(kDaemonExitGuard, &status)) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      status = -2;
    }
    pid_ = -1;
    return status;
  }

  pid_t pid() const { return pid_; }
  const std::string& socket_path() const { return socket_path_; }
  std::string Log() const { return ReadFile(log_path_); }

 private:
  KvtierdProcess() = default;

  absl::Status Spawn(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      return absl::InternalError(std::string("posix_spawn ") + argv[0] + ": " + ::strerror(rc));
    }
    return absl::OkStatus();
  }

  // Until the log says ready, or the daemon exits (an error with its log), or the guard passes.
  absl::Status AwaitReady() {
    const auto deadline = std::chrono::steady_clock::now() + kDaemonReadyGuard;
    while (std::chrono::steady_clock::now() < deadline) {
      if (absl::StrContains(Log(), "kvtierd ready")) return absl::OkStatus();
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return absl::FailedPreconditionError("kvtierd ended (" + DescribeWaitStatus(status) +
                                             ") before it was ready; its log:\n" + Log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return absl::DeadlineExceededError("kvtierd not ready after the guard; its log:\n" + Log());
  }

  bool WaitFor(std::chrono::seconds guard, int* status) {
    const auto deadline = std::chrono::steady_clock::now() + guard;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, status, WNOHANG) == pid_) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  pid_t pid_ = -1;
  std::string socket_path_;
  std::string log_path_;
};

// Start with the metrics endpoint on a free port, retrying with another port when the one picked
// was taken meanwhile (another test's daemon); *port is the one serving.
inline absl::StatusOr<std::unique_ptr<KvtierdProcess>> StartWithMetrics(
    const std::string& dir, const std::vector<std::string>& flags, int* port) {
  absl::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    *port = PickFreePort();
    auto p = KvtierdProcess::Start(dir, flags, *port);
    if (p.ok() || !absl::StrContains(p.status().message(), "in use")) return p;
    last = p.status();
  }
  return last;
}

}  // namespace kvtier::testing
