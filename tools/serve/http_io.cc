#include "tools/serve/http_io.h"

namespace kvtier::serve {

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
  co_await http::async_write(conn.socket, res, asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

asio::awaitable<bool> WriteError(Connection& conn, const ApiError& error, bool keep_alive) {
  co_return co_await WriteResponse(conn, static_cast<http::status>(error.status),
                                   "application/json", error.Body(), keep_alive);
}

}  // namespace kvtier::serve
