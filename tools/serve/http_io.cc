#include "tools/serve/http_io.h"

#include <atomic>

namespace kvtier::serve {
namespace {

std::atomic<int64_t> idle_timeout_s{60};

}  // namespace

void SetIdleTimeout(std::chrono::seconds timeout) { idle_timeout_s = timeout.count(); }
std::chrono::seconds IdleTimeout() { return std::chrono::seconds(idle_timeout_s.load()); }

asio::awaitable<bool> WriteResponse(Connection& conn, http::status status,
                                    std::string_view content_type, std::string body,
                                    bool keep_alive, std::string_view allow) {
  http::response<http::string_body> res{status, 11};
  res.set(http::field::server, "kvtier");
  res.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  if (!allow.empty()) res.set(http::field::allow, beast::string_view(allow.data(), allow.size()));
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  beast::error_code ec;
  conn.stream.expires_after(IdleTimeout());
  co_await http::async_write(conn.stream, res, asio::redirect_error(asio::use_awaitable, ec));
  conn.stream.expires_never();
  co_return !ec;
}

asio::awaitable<bool> WriteError(Connection& conn, const ApiError& error, bool keep_alive) {
  co_return co_await WriteResponse(conn, static_cast<http::status>(error.status),
                                   "application/json", error.Body(), keep_alive);
}

}  // namespace kvtier::serve
