#include "tools/serve/http_server.h"

#include <fmt/format.h>

#include <csignal>
#include <thread>
#include <vector>

#include "common/log.h"
#include "tools/serve/http_io.h"
#include "tools/serve/http_session.h"

namespace kvtier::serve {
namespace {

constexpr auto kShutdownGrace = std::chrono::milliseconds(500);  // for the last answers
constexpr auto kDrainPoll = std::chrono::milliseconds(20);
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

}  // namespace

struct HttpServer::Impl {
  Impl(ServeContext& c) : ctx(c), acceptor(io), signals(io, SIGINT, SIGTERM), grace(io) {}

  asio::awaitable<void> Accept() {
    for (;;) {
      beast::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(
          asio::make_strand(io), asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // Out of descriptors and the like: say so, wait a little and go on.
        KVTIER_LOG(kWarn, "serve", "accept failed: {}", ec.message());
        asio::steady_timer pause(io, kAcceptRetry);
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      const asio::any_io_executor ex = socket.get_executor();
      asio::co_spawn(ex, ServeConnection(ctx, std::move(socket)), asio::detached);
    }
  }

  void WaitForSignal() {
    signals.async_wait([this](const beast::error_code& ec, int signal) {
      if (!ec) OnSignal(signal);
    });
  }

  // The first signal drains, a second one stops at once.
  void OnSignal(int signal) {
    if (draining) {
      KVTIER_LOG(kInfo, "serve", "signal {} again: stopping now", signal);
      ctx.worker->Stop();
      io.stop();
      return;
    }
    draining = true;
    KVTIER_LOG(kInfo, "serve", "signal {}: draining {} requests (at most {} s), then stopping",
               signal, ctx.in_flight.load(), drain_timeout.count());
    beast::error_code ignored;
    acceptor.close(ignored);
    ctx.draining = true;
    WaitForSignal();
    asio::co_spawn(io, Drain(), asio::detached);
  }

  // Lets the requests in flight finish (new ones get 503), then cancels what is left.
  asio::awaitable<void> Drain() {
    const auto deadline = std::chrono::steady_clock::now() + drain_timeout;
    beast::error_code ec;
    while (ctx.in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      grace.expires_after(kDrainPoll);
      co_await grace.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    ctx.worker->Stop();
    grace.expires_after(kShutdownGrace);
    co_await grace.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    io.stop();
  }

  ServeContext& ctx;
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::signal_set signals;
  asio::steady_timer grace;
  std::chrono::seconds drain_timeout{30};
  bool draining = false;  // in the signal handler and Drain only (one thread at a time: see Run)
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(ServeContext& ctx,
                                                               const std::string& host,
                                                               uint16_t port) {
  auto impl = std::make_unique<Impl>(ctx);
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("--host {}: not an IP address ({})", log::EscapeForLog(host), ec.message()));
  }
  const tcp::endpoint endpoint(address, port);
  auto fail = [&](const char* what) {
    return absl::UnavailableError(
        fmt::format("cannot {} {}:{}: {}", what, host, port, ec.message()));
  };
  if (impl->acceptor.open(endpoint.protocol(), ec); ec) return fail("open a socket for");
  impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (impl->acceptor.bind(endpoint, ec); ec) return fail("bind");
  if (impl->acceptor.listen(asio::socket_base::max_listen_connections, ec); ec)
    return fail("listen on");
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::Run(int threads, std::chrono::seconds drain_timeout) {
  impl_->drain_timeout = drain_timeout;
  Impl& s = *impl_;
  s.WaitForSignal();
  asio::co_spawn(s.io, s.Accept(), asio::detached);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&s] { s.io.run(); });
  s.io.run();
  for (std::thread& t : pool) t.join();
}

}  // namespace kvtier::serve
