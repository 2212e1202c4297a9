// The HTTP plumbing the server's sessions share (Boost.Beast over Asio, C++20 coroutines): one
// connection's socket and read buffer, and writing a whole response. Internal to tools/serve.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format off: <utility> must come first
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "tools/serve/api_error.h"

namespace kvtier::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// One client connection. Shared by the session and, while a request generates, the watcher that
// reads the socket to notice the client leaving (both run on the connection's strand). Reading a
// request and writing a whole response run under the idle timeout (tcp_stream's expiry), so a
// client that sends or reads nothing does not hold a connection forever; a generation runs
// without one.
struct Connection {
  explicit Connection(tcp::socket s) : stream(std::move(s)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;  // bytes read and not parsed yet (a pipelined request's included)
};

using Request = http::request<http::string_body>;

// Writes a complete response; false when the write failed (the client is gone).
// The idle timeout of every connection (set once, before the server starts).
void SetIdleTimeout(std::chrono::seconds timeout);
std::chrono::seconds IdleTimeout();

asio::awaitable<bool> WriteResponse(Connection& conn, http::status status,
                                    std::string_view content_type, std::string body,
                                    bool keep_alive, std::string_view allow = "");

// The error as a JSON response.
asio::awaitable<bool> WriteError(Connection& conn, const ApiError& error, bool keep_alive);

}  // namespace kvtier::serve
