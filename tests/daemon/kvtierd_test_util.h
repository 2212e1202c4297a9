// Helpers for the tests that run real kvtierd processes (kvtierd_process.h): payloads that any
// process can check from the key alone, put/check over the C++ client, forked client processes
// and pipes to line them up.
//
// Payloads. A block's size and bytes are a function of its client key (PayloadBytes, FillPayload),
// so a process that never saw the writer can verify every byte it gets, and a block served under
// the wrong key (another namespace's, another prefix's) never passes.
//
// Children. RunChild forks; the child runs a function returning an exit code and _exits with it
// (no gtest assertions there: a child's failure is its exit code and what it printed to stderr).
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "client/kvtier_client.h"
#include "tests/daemon/kvtierd_process.h"

namespace kvtier::testing {

using protocol::BlockCode;

inline constexpr uint32_t kItSlotBytes = 16 << 10;  // --t1.slot_bytes of these tests

inline Namespace ItNamespace(const std::string& salt = "") {
  Namespace ns;
  ns.model_id = "integration-model";
  ns.block_tokens = 4;
  ns.cache_salt = salt;
  return ns;
}

inline absl::StatusOr<std::unique_ptr<client::Client>> ConnectTo(const KvtierdProcess& d,
                                                                 const Namespace& ns,
                                                                 const std::string& name) {
  return client::Client::Connect({d.socket_path(), ns, name});
}

inline uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 1 to kItSlotBytes bytes, varying with the key.
inline uint32_t PayloadBytes(const BlockKey& key) {
  return 1 + static_cast<uint32_t>((key.lo ^ key.hi) % kItSlotBytes);
}

inline std::vector<std::byte> Payload(const BlockKey& key) {
  std::vector<std::byte> out(PayloadBytes(key));
  uint64_t state = key.lo ^ (key.hi << 1);
  for (size_t i = 0; i < out.size(); i += 8) {
    const uint64_t word = SplitMix(&state);
    std::memcpy(out.data() + i, &word, std::min<size_t>(8, out.size() - i));
  }
  return out;
}

// Keys of `blocks` blocks of tokens seed*1000000 + 0, 1, 2, ... (distinct seeds: distinct
// prefixes), continuing from `parent` when given.
inline std::vector<BlockKey> SeqKeys(const client::Client& c, uint32_t seed, uint32_t blocks,
                                     const std::optional<BlockKey>& parent = std::nullopt) {
  std::vector<uint32_t> tokens(blocks * 4);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = seed * 1000000u + static_cast<uint32_t>(i);
  return c.KeysFor(tokens, parent).value();  // token namespaces only
}

// Puts every key with its Payload; the codes.
inline absl::StatusOr<std::vector<BlockCode>> PutKeys(
    client::Client& c, const std::vector<BlockKey>& keys,
    const std::optional<BlockKey>& parent = std::nullopt) {
  std::vector<std::vector<std::byte>> data;
  std::vector<absl::Span<const std::byte>> spans;
  for (const BlockKey& k : keys) data.push_back(Payload(k));
  for (const auto& d : data) spans.emplace_back(d);
  return c.Put(keys, spans, parent);
}

// Puts every key, retrying those T1 had no room for at that moment (kRetryLater, while the evictor
// makes room) until each is stored or present. Another code is Aborted naming it (the client never
// returns Aborted itself, so callers can tell a wrong answer from a daemon gone).
inline absl::Status PutRetrying(client::Client& c, const std::vector<BlockKey>& keys) {
  for (;;) {
    KVTIER_ASSIGN_OR_RETURN(std::vector<BlockCode> codes, PutKeys(c, keys));
    bool retry = false;
    for (BlockCode code : codes) {
      retry = retry || code == BlockCode::kRetryLater;
      if (code != BlockCode::kOk && code != BlockCode::kAlreadyPresent &&
          code != BlockCode::kRetryLater) {
        return absl::AbortedError("put code " + std::to_string(static_cast<uint32_t>(code)));
      }
    }
    if (!retry) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a back-off, not a wait for state
  }
}

// Gets every key (leases), checks size and every byte of each block found against its Payload,
// releases. *found (may be null) gets whether each was found. An error names the first block that
// was found and differs; blocks not found are not errors here.
inline absl::Status CheckFound(client::Client& c, const std::vector<BlockKey>& keys,
                               std::vector<bool>* found) {
  KVTIER_ASSIGN_OR_RETURN(std::vector<protocol::BlockResult> got, c.Get(keys));
  std::vector<BlockKey> leased;
  absl::Status bad;
  if (found != nullptr) found->assign(keys.size(), false);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (got[i].code != static_cast<uint32_t>(BlockCode::kOk)) continue;
    leased.push_back(keys[i]);
    if (found != nullptr) (*found)[i] = true;
    const std::vector<std::byte> want = Payload(keys[i]);
    const bool same = got[i].payload_bytes == want.size() &&
                      std::memcmp(c.SlotData(got[i].slot), want.data(), want.size()) == 0;
    if (!same && bad.ok()) {
      bad = absl::DataLossError("block " + std::to_string(i) + " of " +
                                std::to_string(keys.size()) + " differs from what was put (" +
                                std::to_string(got[i].payload_bytes) + " bytes, want " +
                                std::to_string(want.size()) + ")");
    }
  }
  KVTIER_RETURN_IF_ERROR(c.Release(leased).status());
  return bad;
}

// Like CheckFound, and every key must be found.
inline absl::Status CheckAll(client::Client& c, const std::vector<BlockKey>& keys) {
  std::vector<bool> found;
  KVTIER_RETURN_IF_ERROR(CheckFound(c, keys, &found));
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!found[i]) return absl::NotFoundError("block " + std::to_string(i) + " is missing");
  }
  return absl::OkStatus();
}

// Forks; the child runs `body` and _exits with what it returns. The child's pid.
inline pid_t RunChild(const std::function<int()>& body) {
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  return pid;
}

// Waits for a child: its wait status.
inline int WaitChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

inline bool ExitedZero(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// A pipe to line processes up: Signal writes n bytes, Await reads n (false at end of file, i.e.
// every writer is gone).
class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) fds_[0] = fds_[1] = -1;
  }
  ~Pipe() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;

  void Signal(size_t n = 1) const {
    for (size_t i = 0; i < n; ++i) (void)!::write(fds_[1], "x", 1);
  }
  // False when nothing came for `guard` (a hang guard) or at end of file.
  bool Await(size_t n = 1, int guard_ms = 120 * 1000) const {
    char c;
    for (size_t i = 0; i < n; ++i) {
      pollfd pfd{fds_[0], POLLIN, 0};
      if (::poll(&pfd, 1, guard_ms) != 1) return false;
      ssize_t r;
      while ((r = ::read(fds_[0], &c, 1)) < 0 && errno == EINTR) {
      }
      if (r != 1) return false;
    }
    return true;
  }
  // Bytes that can be read now without waiting.
  size_t Drain() const {
    size_t n = 0;
    for (pollfd pfd{fds_[0], POLLIN, 0}; ::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);) {
      char c;
      if (::read(fds_[0], &c, 1) != 1) break;
      ++n;
    }
    return n;
  }
  // The parent closes its write end after forking, so Await sees end of file once children die.
  void CloseWrite() {
    if (fds_[1] >= 0) ::close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2];
};

// For children: prints `what` and the status to stderr when it is not OK; 0 or `code`.
inline int ChildCheck(const absl::Status& status, const char* what, int code) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "child %d: %s: %s\n", ::getpid(), what, status.ToString().c_str());
  return code;
}

// Polls `condition` until true or the guard passes (a hang guard for state the daemon reaches
// asynchronously, such as a dead client's cleanup); whether it became true.
inline bool Eventually(const std::function<bool()>& condition,
                       std::chrono::seconds guard = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + guard;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace kvtier::testing
