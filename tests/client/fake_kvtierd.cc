#include "tests/client/fake_kvtierd.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "client/protocol/event_fd.h"
#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "client/protocol/region_layout.h"
#include "client/protocol/shm_region.h"
#include "client/protocol/spsc_ring.h"
#include "client/protocol/unique_fd.h"

namespace kvtier::testing {

using protocol::UniqueFd;

struct FakeKvtierd::State {
  Options options;
  Answer answer;
  UniqueFd listener;
  UniqueFd conn;
  UniqueFd t1;
  std::unique_ptr<protocol::ShmRegion> region;
  std::optional<protocol::EventFd> daemon_bell, client_bell;
  mutable absl::Mutex mu;
  protocol::Request last ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<FakeKvtierd>> FakeKvtierd::Start(const std::string& socket_path,
                                                                const Options& options,
                                                                Answer answer) {
  auto state = std::make_unique<State>();
  state->options = options;
  state->answer = std::move(answer);
  state->listener = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  if (::bind(state->listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(state->listener.get(), 4) != 0) {
    return absl::InternalError("fake kvtierd: cannot listen at " + socket_path);
  }
  std::unique_ptr<FakeKvtierd> fake(new FakeKvtierd(std::move(state)));
  fake->thread_ = std::thread([f = fake.get()] { f->Serve(); });
  return fake;
}

FakeKvtierd::FakeKvtierd(std::unique_ptr<State> state) : state_(std::move(state)) {}

FakeKvtierd::~FakeKvtierd() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

protocol::Request FakeKvtierd::last() const {
  absl::MutexLock lock(&state_->mu);
  return state_->last;
}

namespace {

// The Welcome a daemon with these options sends.
protocol::Welcome WelcomeFor(const FakeKvtierd::Options& o, const protocol::RegionLayout& layout) {
  protocol::Welcome w;
  w.session_id = 7;
  w.t1_slot_bytes = o.slot_bytes;
  w.t1_slots = o.t1_slots;
  w.t1_bytes = uint64_t{o.t1_slots} * o.slot_bytes;
  w.layout = layout;
  if (o.t0_slots > 0) {
    w.t0_slot_bytes = o.slot_bytes;
    w.t0_slots = o.t0_slots;
    w.t0_bytes = uint64_t{o.t0_slots} * o.slot_bytes;
    w.t0_pci_bus_id = "0000:00:00.0";  // no such GPU: a plain Client never opens T0
  }
  return w;
}

// Waits (50 ms at a time, while !stop) for `fd` to be readable; false when stopped.
bool WaitReadable(int fd, const std::atomic<bool>& stop) {
  while (!stop) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) return true;
  }
  return false;
}

}  // namespace

void FakeKvtierd::Serve() {
  State& s = *state_;
  if (!WaitReadable(s.listener.get(), stop_)) return;
  s.conn = UniqueFd(::accept4(s.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!protocol::RecvFrame(s.conn.get(), 0).ok()) return;  // the Hello; its content is not checked
  const protocol::RegionLayout layout = *protocol::ComputeLayout(64, 64, 1 << 20);
  s.region = *protocol::ShmRegion::Create(layout);
  s.daemon_bell.emplace(*protocol::EventFd::Create());
  s.client_bell.emplace(*protocol::EventFd::Create());
  const protocol::Welcome welcome = WelcomeFor(s.options, layout);
  s.t1 = UniqueFd(::memfd_create("fake-kvtierd-t1", MFD_CLOEXEC));
  if (::ftruncate(s.t1.get(), static_cast<off_t>(welcome.t1_bytes)) != 0) return;
  const int fds[protocol::kWelcomeFdCount] = {s.t1.get(), s.region->fd(), s.daemon_bell->fd(),
                                              s.client_bell->fd()};
  if (!protocol::SendFrame(s.conn.get(), protocol::EncodeWelcome(welcome), fds).ok()) return;

  protocol::RingConsumer requests(s.region->submission(), &*s.client_bell);
  protocol::RingProducer completions(s.region->completion(), &*s.client_bell);
  const protocol::ArenaView arena = s.region->arena();
  std::byte record[protocol::kRecordBytes];
  while (!stop_) {
    absl::StatusOr<bool> got = requests.TryPop(record);
    if (!got.ok()) return;
    if (!*got) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    absl::StatusOr<protocol::Request> r = protocol::DecodeRequest(record, arena.bytes);
    if (!r.ok()) {  // as kvtierd does: the connection ends
      ++malformed_;
      ::shutdown(s.conn.get(), SHUT_RDWR);
      return;
    }
    protocol::Completion c;
    if (r->op == protocol::Op::kNop) {
      c = protocol::EmptyCompletion(*r, protocol::RequestStatus::kOk);
    } else if (r->op == protocol::Op::kStats) {
      c = protocol::WriteStats(arena, *r, protocol::StatsWire{});
    } else if (r->op == protocol::Op::kLookup) {
      c = protocol::WriteLookupResult(arena, *r, 0, std::vector<uint8_t>(r->count, 0));
    } else {
      std::vector<protocol::BlockResult> results = s.answer(*r, arena);
      results.resize(r->count, {static_cast<uint32_t>(protocol::BlockCode::kFailed), 0, 0, 0});
      c = protocol::WriteBlockResults(arena, *r, results);
    }
    {
      absl::MutexLock lock(&s.mu);
      s.last = *r;
    }
    ++requests_;
    protocol::EncodeCompletion(c, record);
    if (!completions.Push(record, *s.daemon_bell).ok()) return;
  }
}

}  // namespace kvtier::testing
