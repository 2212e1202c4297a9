// The listening side of `kvtier serve`: a TCP acceptor on Asio, one coroutine per connection
// (http_session.h) on a strand of its own, a few I/O threads, and SIGINT/SIGTERM handling: on the
// first signal the acceptor closes and new generation requests get 503 while those in flight run
// to their end, for at most the drain timeout; then the engine worker stops (cancelling what is
// left: streams end, non-streaming requests get 503) and after a short grace for those answers the
// I/O threads return. A second signal stops at once.
//
// Thread-safety: Create and Run from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "tools/serve/serve_context.h"

namespace kvtier::serve {

class HttpServer {
 public:
  // Binds host:port (port 0: any free port). Errors name the address and why (in use, not an
  // address of this host, ...). `ctx` must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Create(ServeContext& ctx,
                                                            const std::string& host, uint16_t port);
  ~HttpServer();

  // The port bound (the one chosen when 0 was asked for).
  uint16_t port() const;

  // Serves on `threads` I/O threads until SIGINT or SIGTERM; then drains and stops as described
  // above.
  void Run(int threads, std::chrono::seconds drain_timeout);

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::serve
