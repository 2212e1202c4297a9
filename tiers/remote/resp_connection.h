// One connection to one node of a Redis-protocol store (DESIGN.md "The remote tier"), over hiredis
// (Debian's 0.14.1: plain TCP, no TLS, so the store must be on a trusted network).
//
// A connection is blocking, with a connect timeout and a per-read/per-write command timeout (the
// socket's SO_RCVTIMEO/SO_SNDTIMEO). Commands are pipelined: Append any number of RESP-formatted
// commands (FormatCommand, or AppendCommandHeader/AppendBulk), then ReadReply once per command, in
// order; the first ReadReply sends everything queued.
//
// Any transport failure (timeout, reset, EOF, a reply hiredis cannot parse) leaves the connection
// in an unknown state: broken() turns true and the caller must drop it. A reply of an unexpected
// type or size is the caller's to reject (CheckReply helpers below); it never breaks the stream.
//
// Errors name the node (host:port) and the command, and carry the code that says their kind:
//   Unavailable        could not connect, or the connection broke (reset, EOF, I/O error)
//   DeadlineExceeded   connect or command timeout
//   Unauthenticated    AUTH refused (wrong user or password)
//   Internal           a reply that breaks the protocol or is not of the expected type or size
//   Aborted            the store answered with an error reply (OOM, CLUSTERDOWN, ...)
//
// Writing. Commands are queued by Append and sent by the next ReadReply in one sendmsg (per
// IOV_MAX parts): small commands are copied into the connection's queue, large parts (a SET's
// value: kDirectWriteBytes and up) are sent from where the caller has them, never copied. Sends use
// MSG_NOSIGNAL, so a store that closes a connection mid-write is an error value, not a SIGPIPE.
//
// Reading. hiredis parses every reply but one kind: replies are read in 256 KiB reads straight into
// its reader's buffer, and it builds a redisReply of each. A bulk string read with ReadBulk (a
// GET's value) does not go through it: once its "$<len>\r\n" is parsed here (len checked against
// kMaxBulkBytes), the bytes the buffer already holds are copied out and the rest is received
// straight from the socket into the caller's memory (recvmsg, MSG_WAITALL), so a 2 MiB value
// crosses user space once instead of three times (hiredis's buffer, its reply's copy, the
// caller's). hiredis stays for the rest: cluster maps, errors, redirects, AUTH, small replies. The
// two share one buffer (hiredis's), touched here only between whole replies.
//
// Thread-safety: a RespConnection is used by one thread at a time (the pool in cluster_router.h
// hands each to one caller). The free functions are pure.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "common/status.h"

struct redisContext;
struct redisReply;

namespace kvtier {

struct RespEndpoint {
  std::string host;
  uint16_t port = 0;

  std::string Name() const;  // "host:port"
  friend bool operator==(const RespEndpoint& a, const RespEndpoint& b) {
    return a.port == b.port && a.host == b.host;
  }
};

// "host:port" (host non-empty, port in [1, 65535]); "[v6addr]:port" for IPv6. InvalidArgument
// naming `setting` otherwise.
absl::StatusOr<RespEndpoint> ParseEndpoint(std::string_view text, std::string_view setting);

// `text` as a whole decimal number that fits `out` (no sign, no spaces); false otherwise.
bool ParseDecimal(std::string_view text, uint32_t& out);

struct RespConnectionOptions {
  uint32_t connect_timeout_ms = 1000;
  uint32_t command_timeout_ms = 2000;
  // AUTH after connecting: `AUTH user password` (ACL) when both are set, `AUTH password` when only
  // the password is; no AUTH without a password.
  std::string user;
  std::string password;
};

inline constexpr size_t kDirectWriteBytes = 64 * 1024;
// The longest bulk string ReadBulk accepts (Redis's own proto-max-bulk-len default), and the most
// reply bytes hiredis may hold unparsed: a store that announces or sends more is a protocol error.
inline constexpr size_t kMaxBulkBytes = size_t{512} << 20;

// Where ReadBulk puts a bulk string's bytes, chosen once the store has announced its length.
class BulkSink {
 public:
  virtual ~BulkSink() = default;
  // `len` (<= kMaxBulkBytes) is the announced length. Returns the memory its first bytes go to,
  // in order, at most `len` bytes in all (fewer: the rest is read and dropped). The spans must
  // stay valid until ReadBulk returns. Called once per reply read; a command sent again (after a
  // redirect) calls it again, and only the last call's memory holds the reply.
  virtual absl::Span<const iovec> Place(size_t len) = 0;
};

struct RespReplyDeleter {
  void operator()(redisReply* reply) const;
};
using RespReply = std::unique_ptr<redisReply, RespReplyDeleter>;

class RespConnection {
 public:
  // Connects, sets the command timeout, and AUTHs when a password is set. Unauthenticated (naming
  // node and user) when the store refuses the credentials.
  static absl::StatusOr<std::unique_ptr<RespConnection>> Connect(
      const RespEndpoint& endpoint, const RespConnectionOptions& options);
  ~RespConnection();
  RespConnection(const RespConnection&) = delete;
  RespConnection& operator=(const RespConnection&) = delete;

  const RespEndpoint& endpoint() const { return endpoint_; }
  bool broken() const { return broken_; }

  // Queues one whole RESP command, given as consecutive parts (so a SET's value can stay where
  // the caller has it). Parts of kDirectWriteBytes and up are not copied: they must stay valid
  // until the next ReadReply returns. Nothing is sent before that ReadReply.
  void Append(absl::Span<const std::string_view> parts);
  void Append(std::string_view formatted) { Append(absl::MakeConstSpan(&formatted, 1)); }
  // Sends whatever is queued, then reads one reply. `command` names the command in errors. A
  // transport failure marks the connection broken. An error reply is returned as a reply (type
  // REDIS_REPLY_ERROR), not as a Status: redirects (MOVED, ASK) are errors the caller handles.
  absl::StatusOr<RespReply> ReadReply(std::string_view command);
  // ReadReply, except that a bulk string (not nil) is delivered to `sink`: then the result holds a
  // null RespReply. Other replies (nil, errors, other types) are returned as ReadReply returns
  // them. A length over kMaxBulkBytes or malformed, or a value not followed by CRLF: Internal; a
  // reply cut short: Unavailable (or DeadlineExceeded); each breaks the connection, and the
  // sink's memory then holds undefined bytes (never more than it placed).
  absl::StatusOr<RespReply> ReadBulk(std::string_view command, BulkSink& sink);
  // Append(FormatCommand(args)) + ReadReply(args[0]).
  absl::StatusOr<RespReply> Command(absl::Span<const std::string_view> args);

 private:
  RespConnection(RespEndpoint endpoint, redisContext* context);
  absl::Status Authenticate(const RespConnectionOptions& options);
  absl::Status TransportError(std::string_view command);
  absl::Status Flush();
  absl::Status SendQueued(std::string_view command);
  absl::Status FillReader(std::string_view command, size_t max_bytes);
  absl::StatusOr<std::string_view> PeekLine(std::string_view command);
  std::vector<iovec> ValueIovecs(BulkSink& sink, size_t len, char* crlf);
  void TakeBuffered(std::vector<iovec>& iov);
  absl::Status ReadInto(std::string_view command, std::vector<iovec> iov);
  absl::Status ReadError(std::string_view command, ssize_t n, int err);

  // A queued piece: bytes of small_ at [offset, offset + size), or a caller's part at `data`.
  struct Piece {
    const char* data = nullptr;  // null: in small_
    size_t offset = 0;
    size_t size = 0;
  };

  RespEndpoint endpoint_;
  redisContext* context_;
  bool broken_ = false;
  absl::Status write_error_;   // of a failed send, for the next ReadReply
  std::string small_;          // copies of small commands, in queue order
  std::vector<char> scratch_;  // where ReadBulk drops the bytes of a value no sink placed
  std::vector<Piece> queued_;  // what the next ReadReply sends, in order
};

// RESP formatting: "*<argc>\r\n" then, per argument, "$<len>\r\n<bytes>\r\n".
void AppendCommandHeader(std::string& out, size_t argc);
void AppendBulk(std::string& out, std::string_view arg);
// "$<len>\r\n" only: the caller appends exactly `len` bytes and then "\r\n".
void AppendBulkHeader(std::string& out, size_t len);
std::string FormatCommand(absl::Span<const std::string_view> args);

// Reply checks: each names the node and the command and never trusts a size it did not check.
// The reply's text for errors: "error reply: <text>", "array of 3", "integer 7", ...
std::string DescribeReply(const redisReply& reply);
// Aborted "remote <node>: <command>: the store answered: <text>" for an error reply.
absl::Status ErrorReplyStatus(const RespEndpoint& node, std::string_view command,
                              const redisReply& reply);
// Internal "remote <node>: <command>: unexpected reply (<DescribeReply>), expected <expected>".
absl::Status UnexpectedReply(const RespEndpoint& node, std::string_view command,
                             const redisReply& reply, std::string_view expected);
// OK for the status reply "+OK"; ErrorReplyStatus for an error reply; UnexpectedReply otherwise.
absl::Status ExpectOk(const RespEndpoint& node, std::string_view command, const redisReply& reply);
// The integer of an integer reply in [min, max]; ErrorReplyStatus or UnexpectedReply otherwise.
absl::StatusOr<int64_t> ExpectInteger(const RespEndpoint& node, std::string_view command,
                                      const redisReply& reply, int64_t min, int64_t max);

}  // namespace kvtier
