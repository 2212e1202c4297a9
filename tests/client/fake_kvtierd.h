// A stand-in for kvtierd in the test's own process, for client tests that need no real daemon:
// it listens on a Unix socket, takes one client, answers its Hello with a Welcome (T1 a memfd of
// t1_slots * slot_bytes; a T0 section with a made-up IPC handle when t0_slots > 0, which a plain
// Client never opens) and then serves its rings from a thread: each request is decoded with the
// daemon's own decoder (DecodeRequest: a malformed one is counted and answered with no results),
// handed to `answer`, and completed with the BlockResults it returns.
//
// What it proves: what a client sent (requests(), and `answer` sees each request's arguments in
// the arena), and that a client refusing bad arguments sent nothing.
//
// Thread-safety: the accessors may be called from any thread; `answer` runs on the server thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/protocol/record_codec.h"
#include "common/status.h"

namespace kvtier::testing {

class FakeKvtierd {
 public:
  struct Options {
    uint32_t t1_slots = 16;
    uint32_t slot_bytes = 4096;  // T1's, and T0's when it has one
    uint32_t t0_slots = 0;       // 0: no T0
  };
  // One BlockResult per item of `request`, whose arguments are in `arena`.
  using Answer = std::function<std::vector<protocol::BlockResult>(const protocol::Request& request,
                                                                  protocol::ArenaView arena)>;

  // Listens at socket_path and serves the first client that connects.
  static absl::StatusOr<std::unique_ptr<FakeKvtierd>> Start(const std::string& socket_path,
                                                            const Options& options, Answer answer);
  ~FakeKvtierd();  // stops serving and closes the connection

  // Requests decoded and answered so far, and requests DecodeRequest refused.
  uint64_t requests() const { return requests_.load(); }
  uint64_t malformed() const { return malformed_.load(); }
  // The last request answered (valid when requests() > 0).
  protocol::Request last() const;

 private:
  struct State;
  explicit FakeKvtierd(std::unique_ptr<State> state);
  void Serve();

  std::unique_ptr<State> state_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kvtier::testing
