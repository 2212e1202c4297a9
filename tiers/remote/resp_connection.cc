#include "tiers/remote/resp_connection.h"

// sds.h (hiredis's string buffer, which FillReader fills) has no C++ guards, and hiredis.h
// includes it without any: it must come first, in C linkage.
extern "C" {
#include <sds.h>
}

#include <fmt/format.h>
#include <hiredis.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <optional>
#include <vector>

#include "common/log.h"

namespace kvtier {
namespace {

timeval ToTimeval(uint32_t ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>(ms % 1000) * 1000;
  return tv;
}

// What the store said, made safe and short for a message (the store is outside the process).
std::string StoreText(const char* text, size_t len) {
  constexpr size_t kMax = 200;
  std::string_view view(text == nullptr ? "" : text, text == nullptr ? 0 : len);
  std::string out = log::EscapeForLog(view.substr(0, kMax));
  if (view.size() > kMax) out += "...";
  return out;
}

bool IsTimeout(int saved_errno) { return saved_errno == EAGAIN || saved_errno == EWOULDBLOCK; }

// Marks `n` more bytes of iov[first...] done: whole iovecs move `first` on, a part shortens one.
void Advance(std::vector<iovec>& iov, size_t& first, size_t n) {
  while (n > 0 && first < iov.size()) {
    const size_t take = std::min(n, iov[first].iov_len);
    iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
    iov[first].iov_len -= take;
    n -= take;
    if (iov[first].iov_len == 0) ++first;
  }
}

// The length of a bulk string's header line ("$<digits>", as PeekLine returns it) when it is
// well-formed and at most kMaxBulkBytes.
std::optional<uint64_t> BulkLength(std::string_view line) {
  uint64_t len = 0;
  const char* end = line.data() + line.size();
  if (line.size() < 2) return std::nullopt;
  const auto [at, error] = std::from_chars(line.data() + 1, end, len);
  if (error != std::errc() || at != end || len > kMaxBulkBytes) return std::nullopt;
  return len;
}

}  // namespace

std::string RespEndpoint::Name() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

absl::StatusOr<RespEndpoint> ParseEndpoint(std::string_view text, std::string_view setting) {
  const size_t colon = text.rfind(':');
  std::string_view host = colon == std::string_view::npos ? text : text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  uint32_t port = 0;
  if (colon == std::string_view::npos || host.empty() ||
      !ParseDecimal(text.substr(colon + 1), port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: \"{}\" is not host:port (port in [1, 65535])", setting, log::EscapeForLog(text)));
  }
  return RespEndpoint{std::string(host), static_cast<uint16_t>(port)};
}

bool ParseDecimal(std::string_view text, uint32_t& out) {
  const char* end = text.data() + text.size();
  auto [at, error] = std::from_chars(text.data(), end, out);
  return !text.empty() && error == std::errc() && at == end;
}

void RespReplyDeleter::operator()(redisReply* reply) const { freeReplyObject(reply); }

RespConnection::RespConnection(RespEndpoint endpoint, redisContext* context)
    : endpoint_(std::move(endpoint)), context_(context) {}

RespConnection::~RespConnection() { redisFree(context_); }

absl::StatusOr<std::unique_ptr<RespConnection>> RespConnection::Connect(
    const RespEndpoint& endpoint, const RespConnectionOptions& options) {
  redisContext* c = redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port,
                                            ToTimeval(options.connect_timeout_ms));
  if (c == nullptr) {
    return absl::ResourceExhaustedError(
        fmt::format("remote {}: connect: out of memory", endpoint.Name()));
  }
  if (c->err != 0) {
    const int saved = errno;
    std::string why = c->errstr;
    redisFree(c);
    const std::string message = fmt::format("remote {}: connect: {}", endpoint.Name(), why);
    if (saved == ETIMEDOUT || IsTimeout(saved) || why.find("timed out") != std::string::npos) {
      return absl::DeadlineExceededError(message);
    }
    return absl::UnavailableError(message);
  }
  std::unique_ptr<RespConnection> connection(new RespConnection(endpoint, c));
  if (redisSetTimeout(c, ToTimeval(options.command_timeout_ms)) != REDIS_OK) {
    return connection->TransportError("connect (setting the command timeout)");
  }
  redisEnableKeepAlive(c);  // best effort: a dead peer is still caught by the command timeout
  // Keep the reader's buffer between replies: hiredis otherwise frees it whenever it empties, and
  // every block-sized reply grows it again by doubling (a copy per doubling).
  c->reader->maxbuf = 0;
  KVTIER_RETURN_IF_ERROR(connection->Authenticate(options));
  return connection;
}

absl::Status RespConnection::Authenticate(const RespConnectionOptions& options) {
  if (options.password.empty()) return absl::OkStatus();
  std::vector<std::string_view> args = {"AUTH"};
  if (!options.user.empty()) args.push_back(options.user);
  args.push_back(options.password);
  KVTIER_ASSIGN_OR_RETURN(RespReply reply, Command(args));
  if (reply->type == REDIS_REPLY_ERROR) {
    const std::string who =
        options.user.empty() ? std::string("the default user") : "user '" + options.user + "'";
    return absl::UnauthenticatedError(fmt::format("remote {}: AUTH as {} refused: {}",
                                                  endpoint_.Name(), log::EscapeForLog(who),
                                                  StoreText(reply->str, reply->len)));
  }
  return ExpectOk(endpoint_, "AUTH", *reply);
}

void RespConnection::Append(absl::Span<const std::string_view> parts) {
  for (std::string_view part : parts) {
    if (part.empty()) continue;
    if (part.size() >= kDirectWriteBytes) {
      queued_.push_back(Piece{part.data(), 0, part.size()});
      continue;
    }
    if (!queued_.empty() && queued_.back().data == nullptr) {
      queued_.back().size += part.size();  // adjacent in small_: one piece
    } else {
      queued_.push_back(Piece{nullptr, small_.size(), part.size()});
    }
    small_.append(part);
  }
}

// Sends every queued piece, in order, with as few sendmsg calls as the socket allows.
absl::Status RespConnection::Flush() {
  std::vector<iovec> iov;
  iov.reserve(queued_.size());
  for (const Piece& p : queued_) {
    const char* data = p.data != nullptr ? p.data : small_.data() + p.offset;
    iov.push_back(iovec{const_cast<char*>(data), p.size});
  }
  queued_.clear();
  for (size_t first = 0; first < iov.size();) {
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    const ssize_t n = ::sendmsg(context_->fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      const std::string where = fmt::format("remote {}: write", endpoint_.Name());
      if (IsTimeout(err)) return absl::DeadlineExceededError(where + ": timed out");
      return absl::UnavailableError(fmt::format("{}: {}", where, std::strerror(err)));
    }
    Advance(iov, first, static_cast<size_t>(n));
  }
  small_.clear();
  return absl::OkStatus();
}

absl::Status RespConnection::SendQueued(std::string_view command) {
  if (!broken_ && !queued_.empty()) {
    write_error_ = Flush();
    broken_ = !write_error_.ok();
  }
  if (!write_error_.ok()) return write_error_;
  if (broken_) {
    return absl::UnavailableError(
        fmt::format("remote {}: {}: connection already broken", endpoint_.Name(), command));
  }
  return absl::OkStatus();
}

absl::StatusOr<RespReply> RespConnection::ReadReply(std::string_view command) {
  KVTIER_RETURN_IF_ERROR(SendQueued(command));
  constexpr size_t kReadChunk = 256 * 1024;
  void* raw = nullptr;
  if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) return TransportError(command);
  while (raw == nullptr) {
    KVTIER_RETURN_IF_ERROR(FillReader(command, kReadChunk));
    if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) return TransportError(command);
  }
  return RespReply(static_cast<redisReply*>(raw));
}

// One read(2) of up to `max_bytes` straight into the end of hiredis's reader buffer (what
// redisReaderFeed would append, without its 16 KiB reads and the copy from a stack buffer).
absl::Status RespConnection::FillReader(std::string_view command, size_t max_bytes) {
  redisReader* r = context_->reader;
  if (r->len - r->pos > kMaxBulkBytes + max_bytes) {  // hiredis would buffer without a bound
    broken_ = true;
    return absl::InternalError(fmt::format("remote {}: {}: a reply of more than {} bytes",
                                           endpoint_.Name(), command, kMaxBulkBytes));
  }
  r->buf = sdsMakeRoomFor(r->buf, max_bytes);
  if (r->buf == nullptr) {
    broken_ = true;
    return absl::ResourceExhaustedError(
        fmt::format("remote {}: {}: out of memory reading a reply", endpoint_.Name(), command));
  }
  for (;;) {
    const ssize_t n = ::read(context_->fd, r->buf + sdslen(r->buf), max_bytes);
    if (n > 0) {
      sdsIncrLen(r->buf, static_cast<int>(n));  // n <= max_bytes <= 256 KiB
      r->len = sdslen(r->buf);
      return absl::OkStatus();
    }
    if (n < 0 && errno == EINTR) continue;
    return ReadError(command, n, errno);
  }
}

absl::Status RespConnection::ReadError(std::string_view command, ssize_t n, int err) {
  broken_ = true;
  const std::string where = fmt::format("remote {}: {}", endpoint_.Name(), command);
  if (n == 0) return absl::UnavailableError(where + ": connection closed by the store");
  if (IsTimeout(err)) return absl::DeadlineExceededError(where + ": timed out");
  return absl::UnavailableError(fmt::format("{}: {}", where, std::strerror(err)));
}

// The next reply's first line when it is a bulk string's header ("$<len>", without its CRLF), or
// an empty view when the reply is something else (its first byte is not '$'): hiredis's to parse.
absl::StatusOr<std::string_view> RespConnection::PeekLine(std::string_view command) {
  constexpr size_t kPeekBytes = 4096;  // the header and a value's start: little to copy out later
  constexpr size_t kMaxLine = 32;      // "$" and 20 digits, with room
  redisReader* r = context_->reader;
  for (;;) {
    const std::string_view buffered(r->buf + r->pos, r->len - r->pos);
    if (!buffered.empty() && buffered[0] != '$') return std::string_view();
    const size_t end = buffered.substr(0, kMaxLine).find("\r\n");
    if (end != std::string_view::npos) return buffered.substr(0, end);
    if (buffered.size() >= kMaxLine) {
      broken_ = true;
      return absl::InternalError(
          fmt::format("remote {}: {}: protocol error: a bulk length line longer than {} bytes",
                      endpoint_.Name(), command, kMaxLine));
    }
    KVTIER_RETURN_IF_ERROR(FillReader(command, kPeekBytes));
  }
}

absl::StatusOr<RespReply> RespConnection::ReadBulk(std::string_view command, BulkSink& sink) {
  KVTIER_RETURN_IF_ERROR(SendQueued(command));
  if (context_->reader->ridx != -1) return ReadReply(command);  // mid-reply (never, between calls)
  KVTIER_ASSIGN_OR_RETURN(const std::string_view line, PeekLine(command));
  if (line.empty() || line == "$-1") return ReadReply(command);  // not a bulk string, or nil
  const std::optional<uint64_t> len = BulkLength(line);
  if (!len.has_value()) {
    broken_ = true;
    return absl::InternalError(
        fmt::format("remote {}: {}: protocol error: bulk length \"{}\" is not in [0, {}]",
                    endpoint_.Name(), command, StoreText(line.data(), line.size()), kMaxBulkBytes));
  }
  context_->reader->pos += line.size() + 2;
  char crlf[2] = {0, 0};
  std::vector<iovec> iov = ValueIovecs(sink, *len, crlf);
  TakeBuffered(iov);
  KVTIER_RETURN_IF_ERROR(ReadInto(command, std::move(iov)));
  if (crlf[0] != '\r' || crlf[1] != '\n') {
    broken_ = true;
    return absl::InternalError(
        fmt::format("remote {}: {}: protocol error: a bulk string of {} bytes not followed by CRLF",
                    endpoint_.Name(), command, *len));
  }
  return RespReply();
}

// Where a value of `len` bytes goes, in order: the sink's memory (at most len bytes of it), then
// scratch_ for the bytes it did not place (read and dropped), then the CRLF after it into `crlf`.
std::vector<iovec> RespConnection::ValueIovecs(BulkSink& sink, size_t len, char* crlf) {
  std::vector<iovec> iov;
  size_t placed = 0;
  for (const iovec& v : sink.Place(len)) {
    const size_t take = std::min(v.iov_len, len - placed);
    if (take > 0) iov.push_back(iovec{v.iov_base, take});
    placed += take;
  }
  if (placed < len) scratch_.resize(std::min<size_t>(len - placed, 256 * 1024));
  for (size_t left = len - placed; left > 0;) {
    const size_t take = std::min(left, scratch_.size());
    iov.push_back(iovec{scratch_.data(), take});
    left -= take;
  }
  iov.push_back(iovec{crlf, 2});
  return iov;
}

// Copies what hiredis's buffer already holds into the front of `iov` (and drops those iovecs or
// parts of them), and leaves the buffer holding only what comes after.
void RespConnection::TakeBuffered(std::vector<iovec>& iov) {
  redisReader* r = context_->reader;
  size_t first = 0;
  while (first < iov.size() && r->pos < r->len) {
    const size_t take = std::min(iov[first].iov_len, r->len - r->pos);
    std::memcpy(iov[first].iov_base, r->buf + r->pos, take);
    Advance(iov, first, take);
    r->pos += take;
  }
  sdsrange(r->buf, static_cast<int>(r->pos), -1);  // pos <= len, within int (FillReader bounds it)
  r->pos = 0;
  r->len = sdslen(r->buf);
  iov.erase(iov.begin(), iov.begin() + static_cast<ptrdiff_t>(first));
}

// Fills every iovec from the socket, in order: recvmsg with MSG_WAITALL, which sleeps until the
// whole request is there (or the command timeout passes, or the store closes the connection).
absl::Status RespConnection::ReadInto(std::string_view command, std::vector<iovec> iov) {
  for (size_t first = 0; first < iov.size();) {
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    const ssize_t n = ::recvmsg(context_->fd, &msg, MSG_WAITALL);
    if (n > 0) {
      Advance(iov, first, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return ReadError(command, n, errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<RespReply> RespConnection::Command(absl::Span<const std::string_view> args) {
  const std::string formatted = FormatCommand(args);  // lives until its ReadReply has sent it
  Append(formatted);
  return ReadReply(args.empty() ? std::string_view("(empty)") : args[0]);
}

absl::Status RespConnection::TransportError(std::string_view command) {
  const int saved = errno;
  broken_ = true;
  const std::string where = fmt::format("remote {}: {}", endpoint_.Name(), command);
  switch (context_->err) {
    case REDIS_ERR_IO:
      if (IsTimeout(saved)) return absl::DeadlineExceededError(where + ": timed out");
      return absl::UnavailableError(fmt::format("{}: {}", where, context_->errstr));
    case REDIS_ERR_EOF:
      return absl::UnavailableError(where + ": connection closed by the store");
    case REDIS_ERR_PROTOCOL:
      return absl::InternalError(fmt::format("{}: protocol error: {}", where, context_->errstr));
    default:
      return absl::UnavailableError(fmt::format("{}: {}", where, context_->errstr));
  }
}

void AppendCommandHeader(std::string& out, size_t argc) {
  fmt::format_to(std::back_inserter(out), "*{}\r\n", argc);
}

void AppendBulkHeader(std::string& out, size_t len) {
  fmt::format_to(std::back_inserter(out), "${}\r\n", len);
}

void AppendBulk(std::string& out, std::string_view arg) {
  AppendBulkHeader(out, arg.size());
  out.append(arg);
  out.append("\r\n");
}

std::string FormatCommand(absl::Span<const std::string_view> args) {
  std::string out;
  AppendCommandHeader(out, args.size());
  for (std::string_view arg : args) AppendBulk(out, arg);
  return out;
}

std::string DescribeReply(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_STRING:
      return fmt::format("bulk string of {} bytes", reply.len);
    case REDIS_REPLY_ARRAY:
      return fmt::format("array of {}", reply.elements);
    case REDIS_REPLY_INTEGER:
      return fmt::format("integer {}", reply.integer);
    case REDIS_REPLY_NIL:
      return "nil";
    case REDIS_REPLY_STATUS:
      return "status " + StoreText(reply.str, reply.len);
    case REDIS_REPLY_ERROR:
      return "error reply: " + StoreText(reply.str, reply.len);
    default:
      return fmt::format("reply of type {}", reply.type);
  }
}

absl::Status ErrorReplyStatus(const RespEndpoint& node, std::string_view command,
                              const redisReply& reply) {
  return absl::AbortedError(fmt::format("remote {}: {}: the store answered: {}", node.Name(),
                                        command, StoreText(reply.str, reply.len)));
}

absl::Status UnexpectedReply(const RespEndpoint& node, std::string_view command,
                             const redisReply& reply, std::string_view expected) {
  if (reply.type == REDIS_REPLY_ERROR) return ErrorReplyStatus(node, command, reply);
  return absl::InternalError(fmt::format("remote {}: {}: unexpected reply ({}), expected {}",
                                         node.Name(), command, DescribeReply(reply), expected));
}

absl::Status ExpectOk(const RespEndpoint& node, std::string_view command, const redisReply& reply) {
  if (reply.type == REDIS_REPLY_STATUS && std::string_view(reply.str, reply.len) == "OK") {
    return absl::OkStatus();
  }
  return UnexpectedReply(node, command, reply, "+OK");
}

absl::StatusOr<int64_t> ExpectInteger(const RespEndpoint& node, std::string_view command,
                                      const redisReply& reply, int64_t min, int64_t max) {
  if (reply.type == REDIS_REPLY_INTEGER && reply.integer >= min && reply.integer <= max) {
    return static_cast<int64_t>(reply.integer);
  }
  return UnexpectedReply(node, command, reply, fmt::format("an integer in [{}, {}]", min, max));
}

}  // namespace kvtier
