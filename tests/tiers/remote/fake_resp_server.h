// A loopback TCP peer that answers a RespConnection with bytes a test writes by hand: for the
// faults a real redis-server never makes (a reply cut mid-value, a length past any buffer, a value
// not followed by CRLF). Everything a real store can do is tested against redis-server instead.
//
// One connection: once the first request bytes arrive, `reply` is written whole; then the
// connection is closed (close_after) or held open, silent, until the object dies (a store that
// stalls mid-reply).
//
// Thread-safety: one test thread owns it; its own thread serves the connection.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "tiers/remote/resp_connection.h"

namespace kvtier::testing {

class FakeRespServer {
 public:
  FakeRespServer(std::string reply, bool close_after)
      : reply_(std::move(reply)), close_after_(close_after) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::listen(listen_fd_, 1) == 0 &&
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
    thread_ = std::thread([this] { Serve(); });
  }

  ~FakeRespServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes an accept that is still waiting
    thread_.join();
    ::close(listen_fd_);
  }

  RespEndpoint endpoint() const { return RespEndpoint{"127.0.0.1", port_}; }

 private:
  void Serve() {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    char request[4096];
    if (::read(fd, request, sizeof(request)) > 0) {
      for (size_t at = 0; at < reply_.size();) {
        const ssize_t n = ::send(fd, reply_.data() + at, reply_.size() - at, MSG_NOSIGNAL);
        if (n <= 0) break;
        at += static_cast<size_t>(n);
      }
    }
    while (!close_after_ && !stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0 && ::read(fd, request, sizeof(request)) <= 0) break;
    }
    ::close(fd);
  }

  const std::string reply_;
  const bool close_after_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kvtier::testing
