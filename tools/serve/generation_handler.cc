#include "tools/serve/generation_handler.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "common/log.h"
#include "tools/serve/generation_job.h"
#include "tools/serve/openai_response.h"

namespace kvtier::serve {
namespace {

using Timer = asio::steady_timer;

// Wakes the session: the engine thread (through the channel) and the watcher call Wake on the
// session's strand. A wake-up that comes while the session is not waiting (it is writing, say) is
// remembered in `signalled`, so the next Wait returns at once: a wake-up is never lost. (A bare
// timer.cancel() is: it cancels only a wait already pending.)
struct Waker {
  explicit Waker(const asio::any_io_executor& ex) : timer(ex) {
    timer.expires_at(Timer::time_point::max());
  }
  void Wake() {
    signalled = true;
    timer.cancel();
  }
  asio::awaitable<void> Wait() {
    if (!signalled) {
      beast::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    signalled = false;
  }
  Timer timer;
  bool signalled = false;
};

// The socket watcher's findings.
struct Watch {
  bool done = false;    // the watcher's read completed
  bool closed = false;  // it ended in end-of-stream or an error: the client left
};

asio::awaitable<void> WatchSocket(std::shared_ptr<Connection> conn, std::shared_ptr<Watch> watch,
                                  std::shared_ptr<Waker> waker) {
  beast::error_code ec;
  const size_t n = co_await conn->stream.async_read_some(
      conn->buffer.prepare(4096), asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) {
    conn->buffer.commit(n);
  } else if (ec != asio::error::operation_aborted && ec != beast::error::timeout) {
    watch->closed = true;
  }
  watch->done = true;
  waker->Wake();
}

// Holds a --max-concurrent slot from admission until the request leaves the engine (Release, at
// the latest when destroyed): the slot is free before the last bytes of the answer go out, so a
// client that sends its next request on reading them is not refused.
class InFlight {
 public:
  explicit InFlight(ServeContext& c) : ctx_(c) {}
  ~InFlight() { Release(); }
  void Release() {
    if (std::exchange(held_, false)) ctx_.in_flight.fetch_sub(1);
  }

 private:
  ServeContext& ctx_;
  bool held_ = true;
};

ApiError EngineError(const absl::Status& s) {
  if (absl::IsInvalidArgument(s)) return BadRequest("", std::string(s.message()));
  return MakeError(500, std::string(s.message()), "server_error");
}

ApiError Unavailable() { return MakeError(503, "the server is shutting down", "server_error"); }

// One request's answer, written as the channel fills.
class Responder {
 public:
  Responder(Connection& conn, ResponseHead head, bool stream, bool keep_alive)
      : conn_(conn), head_(std::move(head)), stream_(stream), keep_alive_(keep_alive) {}

  // Writes what `t` brings; false when the write failed. Sets *ended when the response is done.
  asio::awaitable<bool> Write(const RequestChannel::Taken& t, bool* ended);

 private:
  asio::awaitable<bool> Chunk(const std::string& data);
  asio::awaitable<bool> StartStream();

  Connection& conn_;
  const ResponseHead head_;
  const bool stream_;
  const bool keep_alive_;
  bool started_ = false;  // stream headers written
  std::string text_;      // non-streaming: everything so far
};

asio::awaitable<bool> Responder::StartStream() {
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::server, "kvtier");
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.keep_alive(keep_alive_);
  res.chunked(true);
  http::response_serializer<http::empty_body> sr{res};
  beast::error_code ec;
  co_await http::async_write_header(conn_.stream, sr,
                                    asio::redirect_error(asio::use_awaitable, ec));
  started_ = true;
  if (ec) co_return false;
  if (head_.endpoint == Endpoint::kChatCompletions) {
    co_return co_await Chunk(ChunkEvent(head_, "", /*first=*/true, std::nullopt));
  }
  co_return true;
}

asio::awaitable<bool> Responder::Chunk(const std::string& data) {
  beast::error_code ec;
  co_await asio::async_write(conn_.stream, http::make_chunk(asio::buffer(data)),
                             asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

asio::awaitable<bool> Responder::Write(const RequestChannel::Taken& t, bool* ended) {
  *ended = t.ended();
  if (!started_ && !t.error.ok())
    co_return co_await WriteError(conn_, EngineError(t.error), keep_alive_);
  if (!started_ && t.cancelled) co_return co_await WriteError(conn_, Unavailable(), false) && false;
  if (!stream_) {
    text_ += t.text;
    if (!t.completion.has_value()) co_return true;
    co_return co_await WriteResponse(conn_, http::status::ok, "application/json",
                                     CompletionBody(head_, text_, *t.completion), keep_alive_);
  }
  if (!started_ && (t.accepted || t.completion) && !co_await StartStream()) co_return false;
  if (!started_) co_return true;
  if (t.cancelled) co_return false;  // the server stops: end the stream by closing
  std::string out;
  if (!t.error.ok()) out = ErrorEvent(EngineError(t.error).Body());
  if (t.completion.has_value()) {
    out += ChunkEvent(head_, t.text, false, t.completion->finish_reason);
    if (head_.include_usage) out += UsageEvent(head_, *t.completion);
  } else if (!t.text.empty()) {
    out += ChunkEvent(head_, t.text, false, std::nullopt);
  }
  if (*ended) out += kDoneEvent;
  if (!out.empty() && !co_await Chunk(out)) co_return false;
  if (!*ended) co_return true;
  beast::error_code ec;
  co_await asio::async_write(conn_.stream, http::make_chunk_last(),
                             asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

ResponseHead Head(ServeContext& ctx, const ApiRequest& r) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const bool chat = r.endpoint == Endpoint::kChatCompletions;
  return {.endpoint = r.endpoint,
          .id = fmt::format("{}-{:x}{:08x}", chat ? "chatcmpl" : "cmpl", ctx.created,
                            ctx.next_id.fetch_add(1)),
          .created = std::chrono::duration_cast<std::chrono::seconds>(now).count(),
          .model = ctx.model_name,
          .include_usage = r.include_usage};
}

// Runs the admitted job; false when the connection ends.
asio::awaitable<bool> Run(ServeContext& ctx, std::shared_ptr<Connection> conn, Job job,
                          Responder& responder, InFlight& slot) {
  const asio::any_io_executor ex = co_await asio::this_coro::executor;
  auto waker = std::make_shared<Waker>(ex);
  auto watch = std::make_shared<Watch>();
  auto channel =
      std::make_shared<RequestChannel>([ex, waker] { asio::post(ex, [waker] { waker->Wake(); }); });
  job.channel = channel;
  ctx.worker->Submit(std::move(job));
  asio::co_spawn(ex, WatchSocket(conn, watch, waker), asio::detached);
  bool ok = true, ended = false;
  while (ok && !ended) {
    const RequestChannel::Taken taken = channel->Take();
    if (taken.ended()) slot.Release();
    ok = co_await responder.Write(taken, &ended);
    if (!ok || ended) break;
    if (watch->closed) ok = false;
    if (ok) co_await waker->Wait();
  }
  if (!ended) ctx.worker->Cancel(channel);  // the client left or a write failed
  if (!watch->done) {
    conn->stream.cancel();
    while (!watch->done) co_await waker->Wait();
  }
  co_return ok && !watch->closed;
}

}  // namespace

asio::awaitable<bool> HandleGeneration(ServeContext& ctx, std::shared_ptr<Connection> conn,
                                       const Request& req, Endpoint endpoint, bool keep_alive) {
  ApiRequest request;
  std::optional<ApiError> error = ParseApiRequest(endpoint, req.body(), &request);
  if (!error && request.model != ctx.model_name)
    error = ModelNotFound(request.model, ctx.model_name);
  Job job;
  if (!error) error = PrepareJob(ctx, request, &job);
  if (!error && ctx.draining.load()) error = Unavailable();
  if (!error && ctx.in_flight.fetch_add(1) >= ctx.max_concurrent) {
    ctx.in_flight.fetch_sub(1);
    error = MakeError(
        429,
        fmt::format("too many concurrent requests (at most {}); retry later", ctx.max_concurrent),
        "rate_limit_error", "", "rate_limit_exceeded");
  }
  if (error) {
    ctx.metrics->OnRequestDone(Outcome::kRejected, RequestTokens{});
    KVTIER_LOG(kDebug, "serve", "{} {}: {}", error->status,
               log::EscapeForLog(std::string_view(req.target().data(), req.target().size())),
               log::EscapeForLog(error->message));
    co_return co_await WriteError(*conn, *error, keep_alive) && keep_alive;
  }
  InFlight slot(ctx);
  Responder responder(*conn, Head(ctx, request), request.stream, keep_alive);
  co_return co_await Run(ctx, conn, std::move(job), responder, slot) && keep_alive;
}

}  // namespace kvtier::serve
