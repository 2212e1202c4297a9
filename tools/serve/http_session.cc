#include "tools/serve/http_session.h"

#include <fmt/format.h>

#include "common/log.h"
#include "tools/serve/generation_handler.h"
#include "tools/serve/openai_response.h"

namespace kvtier::serve {
namespace {

constexpr uint32_t kHeaderLimit = 16 * 1024;

struct Route {
  std::string_view path;
  http::verb method;
};
constexpr Route kRoutes[] = {{"/health", http::verb::get},
                             {"/metrics", http::verb::get},
                             {"/v1/models", http::verb::get},
                             {"/v1/completions", http::verb::post},
                             {"/v1/chat/completions", http::verb::post}};

ApiError Error(int status, std::string message, std::string type, std::string code = "") {
  return MakeError(status, std::move(message), std::move(type), "", std::move(code));
}

// Answers one request; false when the connection ends.
asio::awaitable<bool> Dispatch(ServeContext& ctx, const std::shared_ptr<Connection>& conn,
                               const Request& req, bool keep_alive) {
  std::string_view target(req.target().data(), req.target().size());
  target = target.substr(0, target.find('?'));
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (r.path == target) route = &r;
  }
  if (route == nullptr) {
    co_return co_await WriteError(
        *conn,
        Error(404, fmt::format("no such path: {}", log::EscapeForLog(target)), "not_found_error"),
        keep_alive) &&
        keep_alive;
  }
  if (req.method() != route->method) {
    const char* allowed = route->method == http::verb::get ? "GET" : "POST";
    co_return co_await WriteResponse(
        *conn, http::status::method_not_allowed, "application/json",
        Error(405, fmt::format("{} takes {} only", route->path, allowed), "invalid_request_error",
              "method_not_allowed")
            .Body(),
        keep_alive, allowed) &&
        keep_alive;
  }
  if (target == "/health") {
    co_return co_await WriteResponse(*conn, http::status::ok, "application/json",
                                     R"({"status":"ok"})", keep_alive) &&
        keep_alive;
  }
  if (target == "/metrics") {
    co_return co_await WriteResponse(*conn, http::status::ok,
                                     "text/plain; version=0.0.4; charset=utf-8",
                                     ctx.metrics->Render(), keep_alive) &&
        keep_alive;
  }
  if (target == "/v1/models") {
    co_return co_await WriteResponse(
        *conn, http::status::ok, "application/json",
        ModelsBody(ctx.model_name, ctx.created, ctx.max_model_len, ctx.vocab_size), keep_alive) &&
        keep_alive;
  }
  co_return co_await HandleGeneration(
      ctx, conn, req,
      target == "/v1/completions" ? Endpoint::kCompletions : Endpoint::kChatCompletions,
      keep_alive);
}

// Reads the next request into *req; false when the connection ends (after answering 413 or 400
// where the client should hear why).
asio::awaitable<bool> ReadRequest(ServeContext& ctx, Connection& conn, Request* req) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(ctx.max_body_bytes);
  beast::error_code ec;
  conn.stream.expires_after(IdleTimeout());
  co_await http::async_read_header(conn.stream, conn.buffer, parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec == http::error::end_of_stream || ec == asio::error::eof ||
      ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
      ec == beast::error::timeout) {
    co_return false;
  }
  const ApiError too_large =
      Error(413, fmt::format("the request body is larger than {} bytes", ctx.max_body_bytes),
            "invalid_request_error", "request_too_large");
  // Beast already compares a Content-Length with the body limit while it parses the header.
  if (ec == http::error::body_limit) {
    co_await WriteError(conn, too_large, false);
    co_return false;
  }
  if (ec) {
    co_await WriteError(
        conn,
        Error(400, fmt::format("bad HTTP request: {}", ec.message()), "invalid_request_error"),
        false);
    co_return false;
  }
  const auto length = parser.content_length();
  if (length.has_value() && *length > ctx.max_body_bytes) {
    co_await WriteError(conn, too_large, false);
    co_return false;
  }
  if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
    http::response<http::empty_body> cont{http::status::continue_, 11};
    co_await http::async_write(conn.stream, cont, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return false;
  }
  conn.stream.expires_after(IdleTimeout());
  co_await http::async_read(conn.stream, conn.buffer, parser,
                            asio::redirect_error(asio::use_awaitable, ec));
  conn.stream.expires_never();
  if (ec == http::error::body_limit) {
    co_await WriteError(conn, too_large, false);
    co_return false;
  }
  if (ec) co_return false;
  *req = parser.release();
  co_return true;
}

}  // namespace

asio::awaitable<void> ServeConnection(ServeContext& ctx, tcp::socket socket) {
  auto conn = std::make_shared<Connection>(std::move(socket));
  for (;;) {
    Request req;
    if (!co_await ReadRequest(ctx, *conn, &req)) break;
    const bool keep_alive = req.keep_alive();
    if (!co_await Dispatch(ctx, conn, req, keep_alive)) break;
  }
  beast::error_code ignored;
  conn->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  conn->stream.close();
}

}  // namespace kvtier::serve
