#include "daemon/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "client/protocol/region_layout.h"
#include "common/log.h"
#include "daemon/accept_backoff.h"
#include "daemon/server_socket.h"
#include "kernels/gpu_runtime.h"  // for the IPC handle's size

namespace kvtier {
namespace {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;
using protocol::FrameHeader;

// A client between accept and Welcome.
struct Handshake {
  Handshake(Local::socket s, asio::io_context& io) : socket(std::move(s)), timer(io) {}
  Local::socket socket;
  asio::steady_timer timer;
  ucred cred{};
  std::vector<gid_t> groups;  // GroupsOf(cred), read once at accept
  std::array<std::byte, sizeof(FrameHeader)> header{};
  std::vector<std::byte> payload;
};

// A client past Welcome.
struct Connection {
  explicit Connection(Local::socket s) : socket(std::move(s)) {}
  Local::socket socket;
  std::unique_ptr<ClientConnection> data;
  std::array<std::byte, 1> probe{};
  std::string who;  // for logs
};

// What a Hello asks for (`field`), within the limit `most` set by config key `key`; 0: `fallback`.
absl::StatusOr<uint32_t> Granted(const char* field, uint32_t asked, uint32_t fallback,
                                 uint32_t most, const char* key) {
  if (asked == 0) return fallback;
  if (asked > most) {
    return absl::ResourceExhaustedError(fmt::format(
        "Hello asks for {} = {}; this daemon allows at most {} ({})", field, asked, most, key));
  }
  return asked;
}

// "pid 12 uid 1000, 'name', model 'id'" for log lines; the client's text escaped (common/log.h).
std::string Describe(const ucred& cred, const protocol::Hello& hello) {
  return fmt::format("pid {} uid {}, '{}', model '{}'", cred.pid, cred.uid,
                     log::EscapeForLog(hello.client_name), log::EscapeForLog(hello.ns.model_id));
}

std::vector<PoolAccess> AccessOf(const std::vector<ServerPool>& pools) {
  std::vector<PoolAccess> access;
  for (const ServerPool& pool : pools) access.push_back(pool.access);
  return access;
}

void SendError(int fd, absl::StatusCode code, const std::string& message) {
  (void)protocol::SendFrame(fd, protocol::EncodeError(protocol::ErrorFrame{code, message}));
}

}  // namespace

class Server::Impl {
 public:
  Impl(const ServerOptions& options, std::vector<ServerPool> pools)
      : options_(options),
        pools_(std::move(pools)),
        access_(AccessOf(pools_)),
        needs_groups_(std::any_of(access_.begin(), access_.end(),
                                  [](const PoolAccess& a) { return !a.gids.empty(); })),
        acceptor_(io_),
        accept_timer_(io_),
        guard_(io_.get_executor()) {}
  // The limits of ServerOptions against the defaults and the protocol's maxima.
  absl::Status CheckLimits() const;
  absl::Status Bind();
  // Fills t0_[p] from pool p's T0 (when it has one), once: every Welcome of that pool carries it.
  absl::Status DescribeT0();
  void Run() {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  void Stop();
  size_t clients() const { return clients_.load(std::memory_order_relaxed); }

 private:
  void Accept();
  // Waits (AcceptBackoff) before accepting again.
  void AcceptFailed(const boost::system::error_code& ec);
  void OnAccepted(Local::socket socket);
  // Whether the peer may use some pool; else the reason it is refused.
  absl::Status Allowed(const ucred& cred, const std::vector<gid_t>& groups) const;
  void ReadHello(const std::shared_ptr<Handshake>& h);
  void OnHello(const std::shared_ptr<Handshake>& h);
  absl::Status Welcome(const std::shared_ptr<Handshake>& h, const protocol::Hello& hello);
  // The pool the client of `h` gets for `hello` (pool_access.h ChoosePool).
  absl::StatusOr<size_t> PoolFor(const Handshake& h, const protocol::Hello& hello) const;
  // The region a Hello gets, or ResourceExhausted when it asks for more than the limits.
  absl::StatusOr<protocol::RegionLayout> LayoutFor(const protocol::Hello& hello) const;
  void Watch(uint64_t id);
  void Close(uint64_t id, const std::string& reason, bool send_error);

  const ServerOptions options_;
  const std::vector<ServerPool> pools_;
  const std::vector<PoolAccess> access_;  // pools_[i].access
  const bool needs_groups_;               // some pool names groups
  asio::io_context io_;
  Local::acceptor acceptor_;
  asio::steady_timer accept_timer_;  // the wait after a failed accept
  AcceptBackoff accept_backoff_;     // io thread only
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
  std::map<uint64_t, std::shared_ptr<Connection>> connections_;  // io thread only
  uint64_t next_id_ = 1;                                         // io thread only
  std::atomic<size_t> clients_{0};
  bool stopped_ = false;
  // Per pool, only its t0_* fields: what every Welcome of that pool says about T0.
  std::vector<protocol::Welcome> t0_;
};

absl::Status Server::Impl::DescribeT0() {
  t0_.assign(pools_.size(), protocol::Welcome{});
  for (size_t p = 0; p < pools_.size(); ++p) {
    const std::optional<T0Pool> t0 = pools_[p].service->t0_pool();
    if (!t0) continue;
    if (t0->pci_bus_id.empty() || t0->pci_bus_id.size() >= protocol::kPciBusIdBytes) {
      return absl::InternalError(
          fmt::format("T0 on GPU {}: PCI bus id '{}' does not fit the Welcome's {} bytes",
                      t0->device, t0->pci_bus_id, protocol::kPciBusIdBytes));
    }
    static_assert(gpu::kIpcHandleBytes == protocol::kT0IpcHandleBytes);
    protocol::Welcome& w = t0_[p];
    w.t0_bytes = t0->bytes;
    w.t0_slot_bytes = t0->slot_bytes;
    w.t0_slots = t0->slots;
    w.t0_pci_bus_id = t0->pci_bus_id;
    w.t0_ipc_handle = t0->ipc_handle.bytes;
    KVTIER_LOG(kInfo, "server", "clients{} on GPU {} ({}) may map T0: {} slots of {} bytes",
               pools_.size() > 1 ? fmt::format(" of pool '{}'", pools_[p].access.name) : "",
               t0->device, t0->pci_bus_id, w.t0_slots, w.t0_slot_bytes);
  }
  return absl::OkStatus();
}

absl::Status Server::Impl::CheckLimits() const { return internal::CheckServerLimits(options_); }

absl::Status Server::Impl::Bind() {
  return internal::BindControlSocket(io_, acceptor_, options_.socket_path, options_.socket_mode);
}

void Server::Impl::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, Local::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) return AcceptFailed(ec);
    const std::string recovered = accept_backoff_.Succeeded(AcceptBackoff::Clock::now());
    if (!recovered.empty()) KVTIER_LOG(kWarn, "server", "{}", recovered);
    OnAccepted(std::move(socket));
    Accept();
  });
}

void Server::Impl::AcceptFailed(const boost::system::error_code& ec) {
  std::string line;
  const std::chrono::milliseconds wait =
      accept_backoff_.Failed(AcceptBackoff::Clock::now(), ec.message(), &line);
  if (!line.empty()) KVTIER_LOG(kWarn, "server", "{}", line);
  accept_timer_.expires_after(wait);
  accept_timer_.async_wait([this](boost::system::error_code timer_ec) {
    if (!timer_ec && acceptor_.is_open()) Accept();
  });
}

absl::Status Server::Impl::Allowed(const ucred& cred, const std::vector<gid_t>& groups) const {
  for (const ServerPool& pool : pools_) {
    if (MayUse(pool.access, cred, groups)) return absl::OkStatus();
  }
  if (pools_.size() == 1) {
    return absl::PermissionDeniedError(
        fmt::format("uid {} gid {} (pid {}) is not allowed by daemon.allowed_uids / "
                    "daemon.allowed_gids",
                    cred.uid, cred.gid, cred.pid));
  }
  return ChoosePool(access_, options_.default_pool, cred, groups, "").status();
}

void Server::Impl::OnAccepted(Local::socket socket) {
  const int fd = socket.native_handle();
  absl::StatusOr<ucred> cred = protocol::PeerCredentials(fd);
  std::vector<gid_t> groups;
  // The user database is asked only when some pool admits by group (as before pools).
  if (cred.ok()) groups = needs_groups_ ? GroupsOf(*cred) : std::vector<gid_t>{cred->gid};
  const absl::Status allowed = cred.ok() ? Allowed(*cred, groups) : cred.status();
  if (!allowed.ok()) {
    const std::string why(allowed.message());
    KVTIER_LOG(kWarn, "server", "refused a client: {}", why);
    SendError(fd, absl::StatusCode::kPermissionDenied, why);
    return;  // the socket closes as it goes out of scope
  }
  auto h = std::make_shared<Handshake>(std::move(socket), io_);
  h->cred = *cred;
  h->groups = std::move(groups);
  h->timer.expires_after(std::chrono::milliseconds(options_.hello_timeout_ms));
  h->timer.async_wait([h](boost::system::error_code ec) {
    if (!ec) h->socket.close();  // no Hello in time: the pending read fails and says so
  });
  ReadHello(h);
}

void Server::Impl::ReadHello(const std::shared_ptr<Handshake>& h) {
  asio::async_read(
      h->socket, asio::buffer(h->header), [this, h](boost::system::error_code ec, size_t) {
        const int fd = h->socket.native_handle();
        if (ec) {
          KVTIER_LOG(kWarn, "server", "client pid {} said no Hello: {}", h->cred.pid, ec.message());
          h->timer.cancel();  // the timer's hold on h goes, so the socket closes now
          return;
        }
        absl::StatusOr<protocol::FrameInfo> info = protocol::DecodeFrameHeader(h->header);
        if (info.ok() && info->type != protocol::FrameType::kHello) {
          info = absl::InvalidArgumentError("the first frame must be Hello");
        }
        if (!info.ok()) {
          KVTIER_LOG(kWarn, "server", "client pid {}: {}", h->cred.pid,
                     std::string(info.status().message()));
          SendError(fd, info.status().code(), std::string(info.status().message()));
          h->timer.cancel();
          return;
        }
        h->payload.resize(info->payload_bytes);
        asio::async_read(h->socket, asio::buffer(h->payload),
                         [this, h](boost::system::error_code ec2, size_t) {
                           if (ec2) {
                             KVTIER_LOG(kWarn, "server", "client pid {}: Hello cut short: {}",
                                        h->cred.pid, ec2.message());
                             h->timer.cancel();
                             return;
                           }
                           OnHello(h);
                         });
      });
}

void Server::Impl::OnHello(const std::shared_ptr<Handshake>& h) {
  h->timer.cancel();
  absl::StatusOr<protocol::Hello> hello = protocol::DecodeHello(h->payload);
  absl::Status status = hello.ok() ? Welcome(h, *hello) : hello.status();
  if (!status.ok()) {
    const std::string who = hello.ok() ? Describe(h->cred, *hello)
                                       : fmt::format("pid {} uid {}", h->cred.pid, h->cred.uid);
    KVTIER_LOG(kWarn, "server", "client {} refused: {}", who,
               log::EscapeForLog(std::string(status.message())));
    SendError(h->socket.native_handle(), status.code(), std::string(status.message()));
  }
}

absl::StatusOr<protocol::RegionLayout> Server::Impl::LayoutFor(const protocol::Hello& hello) const {
  const uint32_t rings = options_.max_ring_entries;
  KVTIER_ASSIGN_OR_RETURN(uint32_t sq, Granted("sq_entries", hello.sq_entries, options_.sq_entries,
                                               rings, "daemon.max_ring_entries"));
  KVTIER_ASSIGN_OR_RETURN(uint32_t cq, Granted("cq_entries", hello.cq_entries, options_.cq_entries,
                                               rings, "daemon.max_ring_entries"));
  KVTIER_ASSIGN_OR_RETURN(uint32_t arena,
                          Granted("arena_bytes", hello.arena_bytes, options_.arena_bytes,
                                  options_.max_arena_bytes, "daemon.max_arena_bytes"));
  return protocol::ComputeLayout(sq, cq, arena);
}

absl::Status Server::Impl::Welcome(const std::shared_ptr<Handshake>& h,
                                   const protocol::Hello& hello) {
  if (connections_.size() >= options_.max_connections) {
    return absl::ResourceExhaustedError(
        fmt::format("{} clients are connected, the most this daemon serves "
                    "(daemon.max_connections); try again when one has gone",
                    connections_.size()));
  }
  KVTIER_ASSIGN_OR_RETURN(protocol::RegionLayout layout, LayoutFor(hello));
  KVTIER_ASSIGN_OR_RETURN(const size_t pool, PoolFor(*h, hello));
  Service& service = *pools_[pool].service;
  KVTIER_ASSIGN_OR_RETURN(std::shared_ptr<Session> session, service.Open(hello.ns));
  KVTIER_ASSIGN_OR_RETURN(std::shared_ptr<protocol::ShmRegion> region,
                          protocol::ShmRegion::Create(layout));
  KVTIER_ASSIGN_OR_RETURN(protocol::EventFd daemon_bell, protocol::EventFd::Create());
  KVTIER_ASSIGN_OR_RETURN(protocol::EventFd client_bell, protocol::EventFd::Create());
  const T1Segment t1 = service.t1_segment();  // the pool's own segment, never another pool's
  protocol::Welcome welcome = t0_[pool];
  welcome.session_id = session->id();
  welcome.t1_bytes = t1.bytes;
  welcome.t1_slot_bytes = t1.slot_bytes;
  welcome.t1_slots = t1.slots;
  welcome.max_batch = protocol::kMaxBatchKeys;
  welcome.layout = layout;
  const int fds[] = {t1.fd, region->fd(), daemon_bell.fd(), client_bell.fd()};
  KVTIER_RETURN_IF_ERROR(
      protocol::SendFrame(h->socket.native_handle(), protocol::EncodeWelcome(welcome), fds));
  const uint64_t id = next_id_++;
  auto conn = std::make_shared<Connection>(std::move(h->socket));
  conn->who = fmt::format("client {} ({}{})", id, Describe(h->cred, hello),
                          pools_.size() > 1 ? ", pool '" + pools_[pool].access.name + "'" : "");
  KVTIER_ASSIGN_OR_RETURN(
      conn->data,
      ClientConnection::Start(service, session, std::move(region), std::move(daemon_bell),
                              std::move(client_bell), options_.connection,
                              [this, id](const std::string& reason) {
                                asio::post(io_, [this, id, reason] { Close(id, reason, true); });
                              }));
  connections_[id] = conn;
  clients_.fetch_add(1, std::memory_order_relaxed);
  KVTIER_LOG(kInfo, "server", "{} connected: rings {}/{}, arena {} bytes", conn->who,
             layout.sq_entries, layout.cq_entries, layout.arena_bytes);
  Watch(id);
  return absl::OkStatus();
}

void Server::Impl::Watch(uint64_t id) {
  const std::shared_ptr<Connection>& conn = connections_.at(id);
  conn->socket.async_read_some(
      asio::buffer(conn->probe), [this, id](boost::system::error_code ec, size_t n) {
        if (ec == asio::error::operation_aborted) return;
        if (n > 0) return Close(id, "sent bytes after Hello (not in protocol version 1)", true);
        Close(id, ec == asio::error::eof ? "closed the connection" : ec.message(), false);
      });
}

void Server::Impl::Close(uint64_t id, const std::string& reason, bool send_error) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  std::shared_ptr<Connection> conn = it->second;
  connections_.erase(it);
  if (send_error) {
    SendError(conn->socket.native_handle(), absl::StatusCode::kInvalidArgument, reason);
  }
  boost::system::error_code ignored;
  conn->socket.close(ignored);
  const size_t leases = conn->data->session().leases_held();
  conn->data.reset();  // stops the worker, then the session gives back leases and open puts
  clients_.fetch_sub(1, std::memory_order_relaxed);
  if (send_error) {
    KVTIER_LOG(kWarn, "server", "{} closed: {} ({} leases given back)", conn->who, reason, leases);
  } else {
    KVTIER_LOG(kInfo, "server", "{} closed: {} ({} leases given back)", conn->who, reason, leases);
  }
}

void Server::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  std::promise<void> done;
  asio::post(io_, [this, &done] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    accept_timer_.cancel();
    while (!connections_.empty()) Close(connections_.begin()->first, "daemon stopping", false);
    guard_.reset();
    done.set_value();
  });
  if (thread_.joinable()) {
    done.get_future().wait();
    io_.stop();
    thread_.join();
  }
  ::unlink(options_.socket_path.c_str());
}

absl::StatusOr<size_t> Server::Impl::PoolFor(const Handshake& h,
                                             const protocol::Hello& hello) const {
  return ChoosePool(access_, options_.default_pool, h.cred, h.groups, hello.pool);
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      Service& service) {
  const std::string name = options.default_pool.empty() ? "default" : options.default_pool;
  ServerPool pool{{name, options.allowed_uids, options.allowed_gids}, &service};
  ServerOptions one = options;
  one.default_pool = name;
  return Start(one, {std::move(pool)});
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      std::vector<ServerPool> pools) {
  if (pools.empty()) return absl::InvalidArgumentError("Server::Start: no pool to serve");
  auto impl = std::make_unique<Impl>(options, std::move(pools));
  KVTIER_RETURN_IF_ERROR(impl->CheckLimits());
  KVTIER_RETURN_IF_ERROR(impl->DescribeT0());
  KVTIER_RETURN_IF_ERROR(impl->Bind());
  impl->Run();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Stop(); }
void Server::Stop() { impl_->Stop(); }
size_t Server::clients() const { return impl_->clients(); }

}  // namespace kvtier
