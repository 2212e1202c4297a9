// The server and the C++ client over a real Unix socket, real shared memory and real tiers: put and
// get with data verified, store-once across clients, namespaces, clients that die holding leases
// and open puts, a client that is not allowed, and malformed records from a hand-made client.
#include "daemon/server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "client/kvtier_client.h"
#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "client/protocol/spsc_ring.h"
#include "tests/tiers/tier_manager_test_util.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using testing::TempDir;

Namespace Ns(const std::string& salt = "") {
  Namespace ns;
  ns.model_id = "test-model";
  ns.block_tokens = 4;
  ns.cache_salt = salt;
  return ns;
}

std::vector<std::byte> Payload(uint64_t i, size_t bytes) {
  std::vector<std::byte> p(bytes);
  testing::FillPayload(i, reinterpret_cast<uint8_t*>(p.data()), bytes);
  return p;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(0660); }

  void Start(uint32_t mode) { Start(mode, testing::ManagerOptions(64, tmp_.Sub("t2"), 256)); }

  void Start(uint32_t mode, const TierManagerOptions& options) {
    server_.reset();
    service_.reset();
    tiers_.reset();
    auto m = TierManager::Create(options);
    ASSERT_TRUE(m.ok()) << m.status();
    tiers_ = std::move(*m);
    scope_ = std::make_unique<KeyScope>(*KeyScope::Load(""));
    service_ = std::make_unique<Service>(*tiers_, *scope_, nullptr);
    ServerOptions o;
    o.socket_path = tmp_.path() + "/kvtierd.sock";
    o.socket_mode = mode;
    o.connection.spin_budget = spin_budget_;
    auto s = Server::Start(o, *service_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  std::unique_ptr<client::Client> Connect(const Namespace& ns = Ns()) {
    auto c = client::Client::Connect({tmp_.path() + "/kvtierd.sock", ns, "test"});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // Keys of `blocks` blocks of tokens starting at `first_token`.
  static std::vector<BlockKey> Keys(client::Client& c, uint32_t blocks, uint32_t first_token = 0) {
    std::vector<uint32_t> tokens(blocks * 4);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = first_token + static_cast<uint32_t>(i);
    return c.KeysFor(tokens).value();
  }

  std::vector<BlockCode> PutAll(client::Client& c, const std::vector<BlockKey>& keys) {
    std::vector<std::vector<std::byte>> data;
    std::vector<absl::Span<const std::byte>> spans;
    for (size_t i = 0; i < keys.size(); ++i) data.push_back(Payload(i, 1000 + i * 37));
    for (const auto& d : data) spans.emplace_back(d);
    auto codes = c.Put(keys, spans);
    EXPECT_TRUE(codes.ok()) << codes.status();
    return codes.ok() ? *codes : std::vector<BlockCode>{};
  }

  void WaitForClients(size_t n) {
    for (int i = 0; i < 2000 && server_->clients() != n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(server_->clients(), n);
  }

  TempDir tmp_;
  std::shared_ptr<SpinBudget> spin_budget_;  // null: every connection polls
  std::unique_ptr<TierManager> tiers_;
  std::unique_ptr<KeyScope> scope_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<Server> server_;
};

// With one spin slot and four busy clients (more than the budget's 3 "CPUs"), connections sleep
// between requests and are woken by their doorbells: every request is still answered, and every
// slot is back in the budget once the clients are gone.
TEST_F(ServerTest, ConnectionsBeyondTheSpinBudgetSleepAndStillServeEveryRequest) {
  spin_budget_ = std::make_shared<SpinBudget>(1, 3);  // 4 clients: more than 3, nobody polls
  Start(0660);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<client::Client> c = Connect(Ns("spin"));
      if (c == nullptr) return failures.fetch_add(1), void();
      for (uint32_t round = 0; round < 5; ++round) {  // 40 blocks: T1 holds them all
        const std::vector<BlockKey> keys = Keys(*c, 2, (t * 1000 + round) * 8);
        if (PutAll(*c, keys) != std::vector<BlockCode>(2, BlockCode::kOk)) failures.fetch_add(1);
        auto found = c->Lookup(keys);
        if (!found.ok() || found->hit_blocks != 2) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  WaitForClients(0);
  EXPECT_TRUE(spin_budget_->TryAcquire());
  EXPECT_FALSE(spin_budget_->TryAcquire());
  spin_budget_->Release();
  for (int i = 0; i < 4; ++i) spin_budget_->Join();  // more connections than CPUs: nobody polls
  EXPECT_FALSE(spin_budget_->TryAcquire());
  spin_budget_->Leave();
  EXPECT_TRUE(spin_budget_->TryAcquire());
}

TEST_F(ServerTest, PutThenGetReturnsTheSameBytes) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const std::vector<BlockKey> keys = Keys(*c, 20);
  EXPECT_EQ(PutAll(*c, keys), std::vector<BlockCode>(20, BlockCode::kOk));
  auto hit = c->Lookup(keys);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->hit_blocks, 20u);
  std::vector<std::vector<std::byte>> out(20, std::vector<std::byte>(c->slot_bytes()));
  std::vector<absl::Span<std::byte>> dst(out.begin(), out.end());
  auto copied = c->GetInto(keys, dst);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, 20u);
  for (size_t i = 0; i < 20; ++i) {
    const auto want = Payload(i, 1000 + i * 37);
    EXPECT_EQ(std::memcmp(out[i].data(), want.data(), want.size()), 0) << i;
  }
  EXPECT_EQ(service_->leases_held(), 0u);
  auto stats = c->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->puts_committed, 20u);
  EXPECT_EQ(stats->lookup_hit_blocks, 20u);
}

// The wire's block results as docs/protocol.md gives them: put_begin's slot comes with the size
// asked, a repeat of a key in the request is present, and the stats op counts through the service.
TEST_F(ServerTest, PutBeginAnswersEachSlotWithTheSizeAsked) {
  auto c = Connect();
  const std::vector<BlockKey> keys = Keys(*c, 2);
  auto begun = c->PutBegin(std::vector<protocol::PutBeginItem>{
      {keys[0], std::nullopt, 4096}, {keys[1], keys[0], 1000}, {keys[0], std::nullopt, 4096}});
  ASSERT_TRUE(begun.ok()) << begun.status();
  EXPECT_EQ((*begun)[0].code, static_cast<uint32_t>(BlockCode::kOk));
  EXPECT_EQ((*begun)[0].payload_bytes, 4096u);
  EXPECT_EQ((*begun)[1].code, static_cast<uint32_t>(BlockCode::kOk));
  EXPECT_EQ((*begun)[1].payload_bytes, 1000u);
  EXPECT_EQ((*begun)[2].code, static_cast<uint32_t>(BlockCode::kAlreadyPresent));
  EXPECT_EQ((*begun)[2].slot, 0u);
  EXPECT_EQ((*begun)[2].payload_bytes, 0u);
  auto stats = c->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->puts_begun, 2u);
  EXPECT_EQ(stats->t1_slots_total, 64u);
  EXPECT_EQ(stats->t1_slots_free, 62u);  // the two open puts' slots
}

TEST_F(ServerTest, TwoClientsStoringOnePrefixStoreItOnceAndNamespacesAreApart) {
  auto a = Connect(), b = Connect(), other = Connect(Ns("tenant-2"));
  const std::vector<BlockKey> keys = Keys(*a, 8);
  EXPECT_EQ(PutAll(*a, keys), std::vector<BlockCode>(8, BlockCode::kOk));
  EXPECT_EQ(PutAll(*b, keys), std::vector<BlockCode>(8, BlockCode::kAlreadyPresent));
  EXPECT_EQ(tiers_->t1().Stats().used_slots, 8u);
  EXPECT_EQ(b->Lookup(keys)->hit_blocks, 8u);
  EXPECT_EQ(other->Lookup(keys)->hit_blocks, 0u);  // the same raw keys name nothing there
  EXPECT_EQ((*other->Get(keys))[0].code, static_cast<uint32_t>(BlockCode::kMissing));
}

TEST_F(ServerTest, ALargePutCommitsWhileItCopiesAndEveryBlockGetsItsOwnOutcome) {
  // 1 MiB slots: Put commits each block while it copies the next (client CommitPipeline), more
  // commits than it keeps in flight at once; stored blocks in between answer kAlreadyPresent.
  TierManagerOptions o = testing::ManagerOptions(48, "", 0);
  o.t1.slot_bytes = o.t1.dma_chunk_bytes = 1u << 20;
  o.t1.capacity_bytes = uint64_t{48} << 20;
  Start(0660, o);
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  constexpr uint32_t kBlocks = 40;
  const std::vector<BlockKey> keys = Keys(*c, kBlocks);
  const size_t sizes[] = {1u << 20, 4096, (1u << 20) - 1, 300001};  // streamed and plain copies
  std::vector<std::vector<std::byte>> data;
  std::vector<absl::Span<const std::byte>> spans;
  for (uint32_t i = 0; i < kBlocks; ++i) data.push_back(Payload(i, sizes[i % 4]));
  for (const auto& d : data) spans.emplace_back(d);
  std::vector<BlockCode> want(kBlocks, BlockCode::kOk);
  for (uint32_t i = 0; i < kBlocks; i += 3) {
    ASSERT_EQ(*c->Put({keys[i]}, {spans[i]}), std::vector<BlockCode>{BlockCode::kOk});
    want[i] = BlockCode::kAlreadyPresent;
  }
  auto codes = c->Put(keys, spans);
  ASSERT_TRUE(codes.ok()) << codes.status();
  EXPECT_EQ(*codes, want);
  std::vector<std::vector<std::byte>> out(kBlocks, std::vector<std::byte>(c->slot_bytes()));
  std::vector<absl::Span<std::byte>> dst(out.begin(), out.end());
  auto copied = c->GetInto(keys, dst);
  ASSERT_TRUE(copied.ok()) << copied.status();
  ASSERT_EQ(*copied, kBlocks);
  for (uint32_t i = 0; i < kBlocks; ++i) {
    EXPECT_EQ(std::memcmp(out[i].data(), data[i].data(), data[i].size()), 0) << i;
  }
  EXPECT_EQ(c->Stats()->puts_committed, kBlocks);
}

TEST_F(ServerTest, AClientKilledMidGetAndMidPutLeavesNoLeaseAndNoPartialBlock) {
  auto a = Connect();
  const std::vector<BlockKey> keys = Keys(*a, 4);
  ASSERT_EQ(PutAll(*a, keys), std::vector<BlockCode>(4, BlockCode::kOk));
  const uint64_t used = tiers_->t1().Stats().used_slots;
  const pid_t child = ::fork();
  if (child == 0) {
    auto c = client::Client::Connect({tmp_.path() + "/kvtierd.sock", Ns(), "doomed"});
    if (!c.ok() || !(*c)->Get(keys).ok()) ::_exit(1);
    // An open put: put_begin done, payload half written, never committed.
    const std::vector<BlockKey> more = (*c)->KeysFor(std::vector<uint32_t>(8, 7)).value();
    auto begun = (*c)->PutBegin(std::vector<protocol::PutBeginItem>{{more[0], std::nullopt, 4096}});
    if (!begun.ok() || (*begun)[0].code != 0) ::_exit(2);
    std::memset((*c)->MutableSlotData((*begun)[0].slot), 0x5a, 100);
    ::kill(::getpid(), SIGKILL);  // leases held, a put open: as a crash would leave them
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
  WaitForClients(1);
  EXPECT_EQ(service_->leases_held(), 0u);
  EXPECT_EQ(tiers_->t1().Stats().used_slots, used);
  EXPECT_TRUE(a->Drop(keys).ok());  // not leased any more: drop works
}

TEST_F(ServerTest, AClientWhoseUidIsNotAllowedIsRefused) {
  Start(0666);  // the file mode lets anyone connect: SO_PEERCRED must refuse
  ASSERT_EQ(::chmod(tmp_.path().c_str(), 0755), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    auto c = client::Client::Connect({tmp_.path() + "/kvtierd.sock", Ns(), "intruder"});
    if (!c.ok() && c.status().code() == absl::StatusCode::kPermissionDenied) ::_exit(0);
    std::fprintf(stderr, "child: %s\n", c.status().ToString().c_str());
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot switch to uid 65534 here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(server_->clients(), 0u);
}

// A hand-made client: handshake by the book, then whatever bytes it likes on the ring.
struct RawClient {
  protocol::UniqueFd socket;
  std::unique_ptr<protocol::ShmRegion> region;
  std::unique_ptr<protocol::EventFd> daemon_bell, client_bell;
};

RawClient ConnectRaw(const std::string& path) {
  RawClient raw;
  raw.socket.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::connect(raw.socket.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  auto hello = protocol::EncodeHello(protocol::Hello{Ns(), "raw"});
  EXPECT_TRUE(protocol::SendFrame(raw.socket.get(), *hello).ok());
  auto welcome_frame = protocol::RecvFrame(raw.socket.get(), protocol::kWelcomeFdCount);
  EXPECT_TRUE(welcome_frame.ok()) << welcome_frame.status();
  auto welcome = protocol::DecodeWelcome(welcome_frame->payload);
  raw.region = *protocol::ShmRegion::Map(std::move(welcome_frame->fds[protocol::kFdRegion]),
                                         welcome->layout);
  raw.daemon_bell =
      std::make_unique<protocol::EventFd>(std::move(welcome_frame->fds[protocol::kFdDaemonBell]));
  raw.client_bell =
      std::make_unique<protocol::EventFd>(std::move(welcome_frame->fds[protocol::kFdClientBell]));
  return raw;
}

// A client that sends three rings' worth of requests before it reads any answer: the daemon fills
// the completion ring, holds back one ring's worth more, then leaves the rest in the submission
// ring (waiting, not spinning, for room) until the client reads; every request is answered, in
// order.
TEST_F(ServerTest, AClientThatReadsNoAnswersForAWhileGetsThemAllInOrder) {
  RawClient raw = ConnectRaw(tmp_.path() + "/kvtierd.sock");
  const uint32_t entries = raw.region->layout().cq_entries;
  const uint64_t total = 3 * uint64_t{entries};
  std::thread writer([&] {
    protocol::RingProducer producer(raw.region->submission(), raw.daemon_bell.get());
    std::byte record[protocol::kRecordBytes];
    for (uint64_t id = 1; id <= total; ++id) {
      protocol::EncodeRequest(protocol::Request{protocol::Op::kNop, id, 0, 0, {}, {}}, record);
      ASSERT_TRUE(producer.Push(record, *raw.client_bell).ok()) << id;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the daemon reaches its cap
  protocol::RingConsumer consumer(raw.region->completion(), raw.daemon_bell.get());
  std::byte record[protocol::kRecordBytes];
  for (uint64_t id = 1; id <= total; ++id) {
    ASSERT_TRUE(consumer.Pop(record, *raw.client_bell).ok()) << id;
    auto c = protocol::DecodeCompletion(record, raw.region->layout().arena_bytes);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->request_id, id);
    ASSERT_EQ(c->status, protocol::RequestStatus::kOk);
  }
  writer.join();
}

TEST_F(ServerTest, MalformedRecordsCloseOnlyThatClient) {
  auto good = Connect();
  const std::vector<BlockKey> keys = Keys(*good, 2);
  ASSERT_EQ(PutAll(*good, keys), std::vector<BlockCode>(2, BlockCode::kOk));
  const std::vector<std::function<void(std::byte*)>> corruptions = {
      [](std::byte* r) { std::memset(r, 0xAB, protocol::kRecordBytes); },  // garbage
      [](std::byte* r) { r[2] = std::byte{9}; },                           // bad version
      [](std::byte* r) { r[3] = std::byte{200}; },                         // unknown op
      [](std::byte* r) { std::memset(r + 24, 0xFF, 4); },  // arg offset out of range
      [](std::byte* r) {
        r[16] = std::byte{0xFF};
        r[17] = std::byte{0xFF};
      },  // count too large
  };
  for (size_t k = 0; k < corruptions.size(); ++k) {
    RawClient raw = ConnectRaw(tmp_.path() + "/kvtierd.sock");
    WaitForClients(2);
    protocol::Request request{protocol::Op::kLookup, 1, 1, 0, {0, 16}, {16, 8}};
    std::byte record[protocol::kRecordBytes];
    protocol::EncodeRequest(request, record);
    corruptions[k](record);
    protocol::RingProducer producer(raw.region->submission(), raw.daemon_bell.get());
    ASSERT_TRUE(*producer.TryPush(record));
    auto frame = protocol::RecvFrame(raw.socket.get(), 0);  // the daemon's Error, then EOF
    ASSERT_TRUE(frame.ok()) << "corruption " << k << ": " << frame.status();
    EXPECT_EQ(frame->info.type, protocol::FrameType::kError) << k;
    WaitForClients(1);
    EXPECT_EQ(good->Lookup(keys)->hit_blocks, 2u) << k;  // the others go on
  }
  EXPECT_GE(service_->Stats().requests_invalid, corruptions.size());
}

}  // namespace
}  // namespace kvtier
