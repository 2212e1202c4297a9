#include "tools/serve_bench/http_client.h"

#include <fmt/format.h>

// clang-format off: <utility> (http_client.h) must come first
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

namespace kvtier::serve_bench {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The start of a body, for messages.
std::string Excerpt(std::string_view body) {
  constexpr size_t kMax = 200;
  std::string s(body.substr(0, kMax));
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return body.size() > kMax ? s + "..." : s;
}

// An OpenAI error body's message, else the body's start.
std::string ErrorMessage(std::string_view body) {
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string()) {
    return j["error"]["message"].get<std::string>();
  }
  return Excerpt(body);
}

// Splits the SSE body into events as its bytes arrive and folds each into the result.
class SseReader {
 public:
  SseReader(StreamResult* result, Clock::time_point start) : r_(result), start_(start) {}

  void Feed(std::string_view bytes) {
    pending_.append(bytes);
    size_t at = 0;
    for (size_t end; (end = pending_.find("\n\n", at)) != std::string::npos; at = end + 2) {
      Event(std::string_view(pending_).substr(at, end - at));
    }
    pending_.erase(0, at);
  }

  bool done() const { return done_; }
  bool failed() const { return !r_->error_kind.empty(); }

 private:
  void Fail(std::string kind, std::string message) {
    if (failed()) return;  // the first error is the one that counts
    r_->error_kind = std::move(kind);
    r_->error = std::move(message);
  }

  void Event(std::string_view event) {
    while (!event.empty() && event.back() == '\r') event.remove_suffix(1);
    if (event.substr(0, 6) != "data: ")
      return Fail("bad event", "not an SSE data event: " + Excerpt(event));
    const std::string_view data = event.substr(6);
    if (data == "[DONE]") {
      done_ = true;
      return;
    }
    const Json j = Json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return Fail("bad event", "an event is not a JSON object: " + Excerpt(data));
    if (j.contains("error")) return Fail("error event", ErrorMessage(data));
    const auto choices = j.find("choices");
    if (choices != j.end() && choices->is_array() && !choices->empty()) Content((*choices)[0]);
    const auto usage = j.find("usage");
    if (usage != j.end() && usage->is_object()) Usage(*usage);
  }

  void Content(const Json& choice) {
    const double now = Since(start_);
    if (r_->ttft_s < 0) {
      r_->ttft_s = now;
    } else {
      r_->gaps_s.push_back(now - last_);
    }
    last_ = now;
    const auto reason = choice.find("finish_reason");
    if (reason != choice.end() && reason->is_string())
      r_->finish_reason = reason->get<std::string>();
  }

  // A server's counts are checked before use: a field of another type, or a count outside
  // [0, kMaxCount] (the report sums them), counts as missing, never as an exception out of the
  // coroutine or an overflow.
  static constexpr int64_t kMaxCount = int64_t{1} << 40;
  static int64_t Count(const Json& obj, const char* key, int64_t missing) {
    const auto it = obj.find(key);
    if (it == obj.end()) return missing;
    if (it->is_number_unsigned()) {
      const uint64_t v = it->get<uint64_t>();
      return v <= static_cast<uint64_t>(kMaxCount) ? static_cast<int64_t>(v) : missing;
    }
    if (!it->is_number_integer()) return missing;
    const int64_t v = it->get<int64_t>();
    return v >= 0 && v <= kMaxCount ? v : missing;
  }

  void Usage(const Json& usage) {
    r_->cached_from = {};  // a later usage event replaces an earlier one whole
    r_->prompt_tokens = Count(usage, "prompt_tokens", -1);
    r_->completion_tokens = Count(usage, "completion_tokens", -1);
    r_->preemptions = Count(usage, "kvtier_preemptions", -1);
    const auto details = usage.find("prompt_tokens_details");
    const bool has = details != usage.end() && details->is_object();
    r_->cached_tokens = has ? Count(*details, "cached_tokens", 0) : 0;
    const auto from = has ? details->find("kvtier_cached_from") : usage.end();
    if (!has || from == details->end() || !from->is_object()) return;
    for (size_t i = 0; i < r_->cached_from.size(); ++i) {
      r_->cached_from[i] = Count(*from, engine::kCacheSourceNames[i], 0);
    }
  }

  StreamResult* r_;
  Clock::time_point start_;
  std::string pending_;
  double last_ = 0;
  bool done_ = false;
};

http::request<http::string_body> Post(const tcp::endpoint& server, const std::string& target,
                                      std::string body) {
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, fmt::format("{}:{}", server.address().to_string(), server.port()));
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.body() = std::move(body);
  req.prepare_payload();
  req.keep_alive(false);
  return req;
}

// The error of a read or write that failed: a timeout or a broken stream.
void Broken(StreamResult* r, const beast::error_code& ec, std::string_view when) {
  if (!r->error_kind.empty()) return;
  r->error_kind = ec == beast::error::timeout ? "timeout" : "broken stream";
  r->error = fmt::format("{}: {}", when, ec.message());
}

// What went wrong with a response read to its end (`ec`: how the reading ended), if anything; an
// error the stream itself carried (SseReader) stays the one reported.
void Classify(StreamResult* r, const std::string& body, bool done, const beast::error_code& ec) {
  if (r->http_status != 200) {
    r->error_kind = fmt::format("http {}", r->http_status);
    r->error = ErrorMessage(body);
  } else if (ec) {
    Broken(r, ec, "mid-stream");
  } else if (!done) {
    Broken(r, http::make_error_code(http::error::partial_message),
           "the stream ended without [DONE]");
  } else if (r->completion_tokens < 0 && r->error_kind.empty()) {
    r->error_kind = "no usage";
    r->error = "the stream ended without a usage chunk";
  }
}

// The GET on the io_context's thread. Asynchronous, for the expiry: a synchronous Asio read goes
// back to polling after SO_RCVTIMEO, so a silent server would hold it forever.
asio::awaitable<absl::StatusOr<std::string>> Get(tcp::endpoint server, std::string target,
                                                 std::chrono::seconds timeout) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  beast::error_code ec;
  auto on = asio::redirect_error(asio::use_awaitable, ec);
  const std::string where =
      fmt::format("GET http://{}:{}{}", server.address().to_string(), server.port(), target);
  stream.expires_after(timeout);  // the whole exchange
  co_await stream.async_connect(server, on);
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, fmt::format("{}:{}", server.address().to_string(), server.port()));
  req.keep_alive(false);
  if (!ec) co_await http::async_write(stream, req, on);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  if (!ec) co_await http::async_read(stream, buffer, parser, on);
  if (ec) co_return absl::UnavailableError(fmt::format("{}: {}", where, ec.message()));
  const auto& res = parser.get();
  if (res.result_int() != 200) {
    co_return absl::UnavailableError(
        fmt::format("{}: HTTP {}: {}", where, res.result_int(), Excerpt(res.body())));
  }
  co_return res.body();
}

}  // namespace

asio::awaitable<StreamResult> StreamCompletion(tcp::endpoint server, std::string target,
                                               std::string body,
                                               std::chrono::seconds read_timeout) {
  const Clock::time_point start = Clock::now();
  StreamResult r;
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  beast::error_code ec;
  auto on = asio::redirect_error(asio::use_awaitable, ec);
  stream.expires_after(read_timeout);
  co_await stream.async_connect(server, on);
  if (ec) {
    r.error_kind = "connect";
    r.error = fmt::format("connecting to {}:{}: {}", server.address().to_string(), server.port(),
                          ec.message());
    r.latency_s = Since(start);
    co_return r;
  }
  http::request<http::string_body> req = Post(server, target, std::move(body));
  co_await http::async_write(stream, req, on);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  SseReader sse(&r, start);
  auto on_chunk = [&sse](uint64_t, beast::string_view data, beast::error_code&) {
    sse.Feed(std::string_view(data.data(), data.size()));
    return data.size();
  };
  parser.on_chunk_body(on_chunk);
  if (!ec) co_await http::async_read_header(stream, buffer, parser, on);
  if (ec) {
    Broken(&r, ec, "before the response's header");
    r.latency_s = Since(start);
    co_return r;
  }
  r.http_status = static_cast<int>(parser.get().result_int());
  while (!ec && !parser.is_done()) {
    stream.expires_after(read_timeout);
    co_await http::async_read_some(stream, buffer, parser, on);
  }
  r.latency_s = Since(start);
  Classify(&r, parser.get().body(), sse.done(), ec);
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  co_return r;
}

absl::StatusOr<std::string> HttpGet(const tcp::endpoint& server, const std::string& target,
                                    std::chrono::seconds timeout) {
  asio::io_context io;
  absl::StatusOr<std::string> out;
  asio::co_spawn(io, Get(server, target, timeout),
                 [&out, &target](std::exception_ptr e, absl::StatusOr<std::string> r) {
                   out = e ? absl::InternalError("GET " + target + ": an exception") : std::move(r);
                 });
  io.run();
  return out;
}

absl::StatusOr<tcp::endpoint> Resolve(const std::string& host, uint16_t port) {
  asio::io_context io;
  tcp::resolver resolver(io);
  beast::error_code ec;
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    return absl::UnavailableError(
        fmt::format("cannot resolve {}:{}: {}", host, port, ec ? ec.message() : "no address"));
  }
  // "localhost" may resolve to ::1 first while a server listens on 127.0.0.1 only (kvtier serve's
  // default): an IPv4 address wins when there is one.
  for (const auto& entry : results) {
    if (entry.endpoint().address().is_v4()) return entry.endpoint();
  }
  return results.begin()->endpoint();
}

}  // namespace kvtier::serve_bench
