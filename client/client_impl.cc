#include "client/client_impl.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <chrono>
#include <cstring>

#include "client/protocol/fd_passing.h"
#include "common/errno_text.h"

namespace kvtier::client {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSleepSliceMs = 50;  // a sleeping client rechecks the socket this often
constexpr uint32_t kPollsPerClockRead = 64;

// A stream socket connected to `path`. connect() on a Unix socket whose listen queue is full (a
// daemon stopped, not dead: nobody accepts) waits for room, for at most SO_SNDTIMEO; the timeout
// stays set, so a later sendmsg that waits for room is bounded the same way.
absl::StatusOr<protocol::UniqueFd> ConnectTo(const std::string& path, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(fmt::format("socket path '{}' is empty or too long", path));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  protocol::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::InternalError("socket: " + ErrnoText(errno));
  const timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout)) != 0) {
    return absl::InternalError("setsockopt(SO_SNDTIMEO): " + ErrnoText(errno));
  }
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EAGAIN) {
      return absl::DeadlineExceededError(
          fmt::format("kvtierd at {} did not take the connection within timeout_ms = {} (its "
                      "listen queue is full: the daemon is stopped or overwhelmed)",
                      path, timeout_ms));
    }
    return absl::UnavailableError(
        fmt::format("cannot reach kvtierd at {}: {}", path, ErrnoText(errno)));
  }
  return fd;
}

uint32_t Align8(uint32_t x) { return (x + 7) & ~7u; }

// What the daemon would take for a malformed request (and close the connection over) is refused
// here instead: ops with keys carry 1 to max_batch, the others none.
absl::Status CheckCount(protocol::Op op, size_t count, uint32_t max_batch) {
  const bool has_keys = op != protocol::Op::kNop && op != protocol::Op::kStats;
  if (has_keys ? count != 0 && count <= max_batch : count == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "{}: {} keys in one request; it takes {}", protocol::OpName(static_cast<uint8_t>(op)), count,
      has_keys ? fmt::format("1 to {} (max_batch)", max_batch) : "none"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client::Impl>> Client::Impl::Connect(const ClientOptions& options) {
  KVTIER_RETURN_IF_ERROR(options.ns.Validate());
  if (options.timeout_ms <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("timeout_ms is {}; it must be above 0", options.timeout_ms));
  }
  if (options.spin_us < 0) {
    return absl::InvalidArgumentError(
        fmt::format("spin_us is {}; it must not be negative", options.spin_us));
  }
  // One deadline for the whole handshake, as for a request: a daemon that accepted and then never
  // answers (stopped with SIGSTOP, wedged) must not hang the engine's start.
  const protocol::Deadline deadline = Clock::now() + std::chrono::milliseconds(options.timeout_ms);
  std::unique_ptr<Impl> impl(new Impl(options, NamespaceRoot(options.ns)));
  KVTIER_ASSIGN_OR_RETURN(impl->socket, ConnectTo(options.socket_path, options.timeout_ms));
  absl::MutexLock lock(&impl->mu);  // nobody else has it yet; the handshake sets up the region
  if (absl::Status s = impl->Handshake(deadline); !s.ok()) {
    if (s.code() != absl::StatusCode::kDeadlineExceeded) return s;
    return absl::DeadlineExceededError(
        fmt::format("kvtierd at {} did not finish the handshake within timeout_ms = {}: {}",
                    options.socket_path, options.timeout_ms, std::string(s.message())));
  }
  return impl;
}

Client::Impl::~Impl() {
  if (t1 != nullptr) ::munmap(t1, welcome.t1_bytes);
}

absl::Status Client::Impl::Handshake(protocol::Deadline deadline) {
  protocol::Hello hello{options.ns,         options.client_name, options.sq_entries,
                        options.cq_entries, options.arena_bytes, options.pool};
  KVTIER_ASSIGN_OR_RETURN(std::vector<std::byte> frame, protocol::EncodeHello(hello));
  // A daemon that refuses us at accept (SO_PEERCRED) sends its Error and closes at once, so the
  // Hello may fail with EPIPE; the Error is still there to read and says why. A failed send means
  // the peer is gone, so the read below cannot wait.
  const absl::Status sent = protocol::SendFrame(socket.get(), frame, {}, deadline);
  if (sent.code() == absl::StatusCode::kDeadlineExceeded) return sent;
  absl::StatusOr<protocol::ReceivedFrame> received =
      protocol::RecvFrame(socket.get(), protocol::kWelcomeFdCount, deadline);
  if (!sent.ok() && !(received.ok() && received->info.type == protocol::FrameType::kError)) {
    return sent;
  }
  KVTIER_ASSIGN_OR_RETURN(protocol::ReceivedFrame reply, std::move(received));
  if (reply.info.type == protocol::FrameType::kError) {
    KVTIER_ASSIGN_OR_RETURN(protocol::ErrorFrame error, protocol::DecodeError(reply.payload));
    return absl::Status(error.code, "kvtierd refused the connection: " + error.message);
  }
  if (reply.info.type != protocol::FrameType::kWelcome) {
    return absl::InvalidArgumentError("kvtierd answered Hello with neither Welcome nor Error");
  }
  KVTIER_ASSIGN_OR_RETURN(welcome, protocol::DecodeWelcome(reply.payload));
  if (reply.fds.size() != protocol::kWelcomeFdCount) {
    return absl::InvalidArgumentError(fmt::format("Welcome came with {} fds, not {}",
                                                  reply.fds.size(), protocol::kWelcomeFdCount));
  }
  KVTIER_RETURN_IF_ERROR(MapTier(std::move(reply.fds[protocol::kFdT1Segment])));
  KVTIER_ASSIGN_OR_RETURN(
      region, protocol::ShmRegion::Map(std::move(reply.fds[protocol::kFdRegion]), welcome.layout));
  daemon_bell = std::make_unique<protocol::EventFd>(std::move(reply.fds[protocol::kFdDaemonBell]));
  client_bell = std::make_unique<protocol::EventFd>(std::move(reply.fds[protocol::kFdClientBell]));
  requests = std::make_unique<protocol::RingProducer>(region->submission(), daemon_bell.get());
  completions = std::make_unique<protocol::RingConsumer>(region->completion(), daemon_bell.get());
  return absl::OkStatus();
}

absl::Status Client::Impl::MapTier(protocol::UniqueFd fd) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) < welcome.t1_bytes) {
    return absl::InvalidArgumentError("the T1 segment is smaller than Welcome says");
  }
  // MAP_POPULATE maps every page now (no memory is allocated: the daemon's segment exists), so
  // copies into and out of T1 never take a page fault on the hot path.
  const int flags = MAP_SHARED | (options.populate_t1 ? MAP_POPULATE : 0);
  void* p = ::mmap(nullptr, welcome.t1_bytes, PROT_READ | PROT_WRITE, flags, fd.get(), 0);
  if (p == MAP_FAILED) return absl::InternalError("mmap of the T1 segment: " + ErrnoText(errno));
  t1 = static_cast<std::byte*>(p);
  return absl::OkStatus();
}

absl::StatusOr<protocol::Completion> Client::Impl::Do(const Call& call, protocol::Request* sent) {
  KVTIER_RETURN_IF_ERROR(Submit(call, 0, sent));
  return Finish(*sent);
}

absl::StatusOr<std::vector<protocol::BlockResult>> Client::Impl::DoBlockResults(const Call& call) {
  protocol::Request sent;
  KVTIER_ASSIGN_OR_RETURN(protocol::Completion done, Do(call, &sent));
  std::vector<protocol::BlockResult> out;
  KVTIER_RETURN_IF_ERROR(protocol::ReadBlockResults(region->arena(), sent, done, limits(), &out));
  return out;
}

protocol::SessionLimits Client::Impl::limits() const {
  return {welcome.t1_slots, welcome.t1_slot_bytes, welcome.t0_slots, welcome.t0_slot_bytes};
}

absl::Status Client::Impl::Submit(const Call& call, uint32_t arena_offset,
                                  protocol::Request* sent) {
  KVTIER_RETURN_IF_ERROR(CheckCount(call.op, call.count, welcome.max_batch));
  const protocol::ArenaView arena = region->arena();
  if (uint64_t{arena_offset} + ArenaBytes(call) > arena.bytes) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: {} keys do not fit the {}-byte arena from offset {}",
        protocol::OpName(static_cast<uint8_t>(call.op)), call.count, arena.bytes, arena_offset));
  }
  // From here every value fits 32 bits: the count is at most max_batch (<= kMaxBatchKeys) and the
  // request's ranges end inside the arena (<= kMaxArenaBytes), both checked above.
  protocol::Request& r = *sent;
  r.op = call.op;
  r.count = static_cast<uint32_t>(call.count);
  r.tier = call.tier;
  const uint32_t arg_bytes = protocol::ArgBytes(call.op, r.count);
  r.arg = {arg_bytes == 0 ? 0 : arena_offset, arg_bytes};
  r.result = {arena_offset + Align8(arg_bytes), protocol::ResultBytes(call.op, r.count)};
  if (r.result.bytes == 0) r.result.offset = 0;  // an empty range has offset 0 (the codec's rule)
  r.request_id = next_request_id++;
  if (call.write_args) call.write_args(arena, r.arg);
  std::byte record[protocol::kRecordBytes];
  protocol::EncodeRequest(r, record);
  return requests->Push(record, *client_bell, options.spin_us * 10);
}

uint32_t Client::Impl::ArenaBytes(const Call& call) {
  if (call.count > protocol::kMaxBatchKeys) return kNeverFits;
  const auto count = static_cast<uint32_t>(call.count);  // <= kMaxBatchKeys, checked above
  return Align8(protocol::ArgBytes(call.op, count)) + Align8(protocol::ResultBytes(call.op, count));
}

absl::StatusOr<protocol::Completion> Client::Impl::Finish(const protocol::Request& sent) {
  KVTIER_ASSIGN_OR_RETURN(protocol::Completion done, Await(sent.request_id));
  if (done.status != protocol::RequestStatus::kOk) {
    absl::Status gone = WhyGone();
    return gone.ok()
               ? absl::InternalError(fmt::format("kvtierd failed request {} ({})", sent.request_id,
                                                 protocol::OpName(static_cast<uint8_t>(sent.op))))
               : gone;
  }
  return done;
}

absl::StatusOr<protocol::Completion> Client::Impl::Await(uint64_t request_id) {
  std::byte record[protocol::kRecordBytes];
  const auto start = Clock::now();
  const auto spin = std::chrono::microseconds(options.spin_us);
  for (uint32_t polls = 1;; ++polls) {
    KVTIER_ASSIGN_OR_RETURN(bool got, completions->TryPop(record));
    if (got) {
      KVTIER_ASSIGN_OR_RETURN(protocol::Completion c,
                              protocol::DecodeCompletion(record, region->layout().arena_bytes));
      if (c.request_id != request_id) {
        return absl::DataLossError(fmt::format("completion for request {} while waiting for {}",
                                               c.request_id, request_id));
      }
      return c;
    }
    // The clock only every 64th poll: read each time, it was half of a polling client's time and
    // delayed noticing the completion.
    if (polls % kPollsPerClockRead != 0) continue;
    const auto waited = Clock::now() - start;
    if (waited < spin) continue;
    if (waited > std::chrono::milliseconds(options.timeout_ms)) {
      return absl::DeadlineExceededError(fmt::format("kvtierd did not answer request {} in {} ms",
                                                     request_id, options.timeout_ms));
    }
    KVTIER_ASSIGN_OR_RETURN(bool sleep, completions->PrepareToSleep());
    if (!sleep) continue;
    pollfd fds[2] = {{client_bell->fd(), POLLIN, 0}, {socket.get(), POLLIN, 0}};
    (void)::poll(fds, 2, kSleepSliceMs);
    completions->EndSleep();
    client_bell->Drain();
    if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) return WhyGone();
  }
}

absl::Status Client::Impl::WhyGone() {
  pollfd pfd{socket.get(), POLLIN, 0};
  if (::poll(&pfd, 1, 0) <= 0) return absl::OkStatus();  // still connected
  // The daemon writes its Error frame whole before it closes; the deadline only guards against
  // a peer that sent part of one and stopped.
  absl::StatusOr<protocol::ReceivedFrame> frame = protocol::RecvFrame(
      socket.get(), 0, Clock::now() + std::chrono::milliseconds(options.timeout_ms));
  if (frame.ok() && frame->info.type == protocol::FrameType::kError) {
    absl::StatusOr<protocol::ErrorFrame> error = protocol::DecodeError(frame->payload);
    if (error.ok())
      return absl::Status(error->code, "kvtierd closed the connection: " + error->message);
  }
  return absl::UnavailableError("kvtierd closed the connection");
}

}  // namespace kvtier::client
