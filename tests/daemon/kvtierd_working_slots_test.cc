// Working slots (protocol v3; docs/protocol.md "Working slots") end to end: real kvtierd processes
// and the real client library. A client takes unkeyed T1 slots within its quota
// (daemon.max_working_slots), fills them through its own mapping of T1, and publishes them under
// their keys with the payload's XXH3-64, or frees them. Pinned here, each against the daemon's
// answer and the bytes another client reads back: the quota; a published block served whole to
// another client, leased to its writer until released; verify_puts refusing a wrong checksum and
// leaving the slot to its writer; a key already cached; repeated and foreign slots; working slots
// given back when their client goes away (process exit, SIGKILL, Client destroyed); tier 0 against
// a daemon without T0, refused by the client before it sends and, sent raw, by the daemon with an
// Error naming the request; and a published block written to T2 by flush_on_stop with the checksum
// given at publish, served after a restart.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client/protocol/fd_passing.h"
#include "client/protocol/frame_codec.h"
#include "client/protocol/record_codec.h"
#include "client/protocol/shm_region.h"
#include "client/protocol/spsc_ring.h"
#include "common/checksum.h"
#include "tests/daemon/kvtierd_test_util.h"

namespace kvtier {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;
using protocol::WorkPublishItem;
using testing::CheckAll;
using testing::ItNamespace;
using testing::KvtierdProcess;
using testing::Payload;
using testing::SeqKeys;

// T1 of 256 slots of 16 KiB, T2 of 256: nothing in these tests is evicted.
const std::vector<std::string> kBaseFlags = {
    "--t1.capacity_bytes", "4MiB", "--t1.slot_bytes", "16KiB", "--t1.dma_chunk_bytes", "1MiB",
    "--t1.touch_threads",  "1",    "--t1.huge_pages", "off",   "--t2.capacity_bytes",  "4MiB"};

std::vector<BlockCode> Codes(const std::vector<BlockResult>& results) {
  std::vector<BlockCode> codes;
  for (const BlockResult& r : results) codes.push_back(static_cast<BlockCode>(r.code));
  return codes;
}

// Fills working slot `slot` of T1 with Payload(key) through c's mapping of T1; the item that
// publishes it with the right checksum.
WorkPublishItem Fill(client::Client& c, uint32_t slot, const BlockKey& key,
                     const std::optional<BlockKey>& parent = std::nullopt) {
  const std::vector<std::byte> payload = Payload(key);
  std::memcpy(c.MutableSlotData(slot), payload.data(), payload.size());
  return WorkPublishItem{key, parent, PayloadChecksum(payload.data(), payload.size()), slot,
                         static_cast<uint32_t>(payload.size())};
}

// T1 slots in use (cached blocks, open puts and working slots of every client).
uint64_t UsedT1(client::Client& c) {
  auto s = c.Stats();
  return s.ok() ? s->t1_slots_total - s->t1_slots_free : ~uint64_t{0};
}

uint64_t LeasesHeld(client::Client& c) {
  auto s = c.Stats();
  return s.ok() ? s->leases_held : ~uint64_t{0};
}

class KvtierdWorkingSlotsTest : public ::testing::Test {
 protected:
  void StartDaemon(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = kBaseFlags;
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto d = KvtierdProcess::Start(dir_.path(), flags);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // Whatever the test did to it, the daemon stops cleanly on SIGTERM (under ASan: nothing leaked).
  void TearDown() override {
    if (daemon_ == nullptr) return;
    const int status = daemon_->Stop(SIGTERM);
    EXPECT_TRUE(testing::ExitedZero(status))
        << "after SIGTERM: " << testing::DescribeWaitStatus(status) << "\n"
        << daemon_->Log();
  }

  std::unique_ptr<client::Client> Connect(const std::string& name = "work") {
    auto c = testing::ConnectTo(*daemon_, ItNamespace(), name);
    EXPECT_TRUE(c.ok()) << c.status() << "\n" << daemon_->Log();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // Takes n T1 working slots, every one of which must be granted; their numbers.
  std::vector<uint32_t> TakeT1(client::Client& c, size_t n) {
    auto taken = c.TakeWorkingSlots(Tier::kT1, n);
    EXPECT_TRUE(taken.ok()) << taken.status();
    std::vector<uint32_t> slots;
    for (const BlockResult& r : taken.value_or(std::vector<BlockResult>{})) {
      EXPECT_EQ(r.code, uint32_t(BlockCode::kOk));
      EXPECT_EQ(r.payload_bytes, c.slot_bytes()) << "a take gives the slot's size";
      slots.push_back(r.slot);
    }
    return slots;
  }

  testing::TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
};

// Quota 4 per client, T0 and T1 together: the fifth take is OverQuota (in the same request as
// granted ones too), another client has its own 4, and a free or a publish makes room.
TEST_F(KvtierdWorkingSlotsTest, TakesStopAtTheQuotaAndAFreeOrAPublishMakesRoom) {
  StartDaemon({"--daemon.max_working_slots", "4"});
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const uint64_t used_before = UsedT1(*c);
  std::vector<uint32_t> slots = TakeT1(*c, 3);
  auto more = c->TakeWorkingSlots(Tier::kT1, 2);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(Codes(*more), (std::vector<BlockCode>{BlockCode::kOk, BlockCode::kOverQuota}));
  EXPECT_EQ((*more)[1].slot, 0u) << "no slot with OverQuota";
  slots.push_back((*more)[0].slot);
  EXPECT_EQ(UsedT1(*c), used_before + 4) << "an OverQuota take holds no slot";
  auto full = c->TakeWorkingSlots(Tier::kT1, 1);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(Codes(*full), std::vector<BlockCode>{BlockCode::kOverQuota});

  // The quota is per client: another one takes its own.
  auto other = Connect("other");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(TakeT1(*other, 4).size(), 4u);

  // A free makes room for one.
  auto freed = c->FreeWorking(Tier::kT1, std::vector<uint32_t>{slots[0]});
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*freed, std::vector<BlockCode>{BlockCode::kOk});
  std::vector<uint32_t> again = TakeT1(*c, 1);
  ASSERT_EQ(again.size(), 1u);
  slots[0] = again[0];
  EXPECT_EQ(Codes(*c->TakeWorkingSlots(Tier::kT1, 1)),
            std::vector<BlockCode>{BlockCode::kOverQuota});

  // A published slot is a cached block, no longer a working slot: it counts against nothing.
  const std::vector<BlockKey> keys = SeqKeys(*c, 1, 1);
  const WorkPublishItem item = Fill(*c, slots[1], keys[0]);
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item}),
            std::vector<BlockCode>{BlockCode::kOk});
  EXPECT_EQ(TakeT1(*c, 1).size(), 1u);
  EXPECT_EQ(Codes(*c->TakeWorkingSlots(Tier::kT1, 1)),
            std::vector<BlockCode>{BlockCode::kOverQuota});
  EXPECT_EQ(c->Stats()->requests_invalid, 0u);
}

// A slot filled through the writer's mapping of T1 and published is a block like any other: the
// chain is found by another client's lookup in T1 and its get returns the same bytes; the writer
// holds it leased (drop refused) until it releases, and then it can be dropped.
TEST_F(KvtierdWorkingSlotsTest, APublishedSlotIsServedToAnotherClientByteForByte) {
  StartDaemon();
  auto writer = Connect("writer");
  auto reader = Connect("reader");
  ASSERT_TRUE(writer != nullptr && reader != nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*writer, 2, 3);
  const std::vector<uint32_t> slots = TakeT1(*writer, keys.size());
  ASSERT_EQ(slots.size(), keys.size());
  std::vector<WorkPublishItem> items;
  for (size_t i = 0; i < keys.size(); ++i) {
    items.push_back(Fill(*writer, slots[i], keys[i],
                         i == 0 ? std::nullopt : std::optional<BlockKey>(keys[i - 1])));
  }
  EXPECT_EQ(reader->Lookup(keys)->hit_blocks, 0u) << "a working slot is not a cached block";
  auto published = writer->PublishWorking(Tier::kT1, items);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(*published, std::vector<BlockCode>(keys.size(), BlockCode::kOk));
  EXPECT_EQ(LeasesHeld(*writer), keys.size()) << "published blocks are leased to their writer";

  auto hit = reader->Lookup(keys);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->hit_blocks, keys.size());
  for (size_t i = 0; i < hit->hit_blocks; ++i) EXPECT_EQ(hit->tiers[i], TierBit(Tier::kT1));
  // The reader's get: the same bytes, in the very slots the writer filled.
  auto got = reader->Get(keys);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ((*got)[i].code, uint32_t(BlockCode::kOk)) << i;
    EXPECT_EQ((*got)[i].slot, slots[i]) << "published where it lies";
    const std::vector<std::byte> want = Payload(keys[i]);
    ASSERT_EQ((*got)[i].payload_bytes, want.size());
    EXPECT_EQ(std::memcmp(reader->SlotData((*got)[i].slot), want.data(), want.size()), 0) << i;
  }
  ASSERT_TRUE(reader->Release(keys).ok());
  EXPECT_EQ(Codes(*reader->Drop(keys)), std::vector<BlockCode>(keys.size(), BlockCode::kLeased));
  auto released = writer->Release(keys);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(Codes(*released), std::vector<BlockCode>(keys.size(), BlockCode::kOk));
  EXPECT_EQ(LeasesHeld(*writer), 0u);
  EXPECT_EQ(Codes(*reader->Drop(keys)), std::vector<BlockCode>(keys.size(), BlockCode::kOk));
  EXPECT_EQ(reader->Lookup(keys)->hit_blocks, 0u);
}

// With daemon.verify_puts the daemon hashes a T1 slot at publish: a wrong checksum is
// BadChecksum, the block is not cached, and the slot is still the writer's working slot, which
// it publishes with the right checksum (or could free).
TEST_F(KvtierdWorkingSlotsTest, WithVerifyPutsAWrongChecksumLeavesTheSlotToItsWriter) {
  StartDaemon({"--daemon.verify_puts", "true"});
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*c, 3, 1);
  const std::vector<uint32_t> slots = TakeT1(*c, 1);
  ASSERT_EQ(slots.size(), 1u);
  WorkPublishItem item = Fill(*c, slots[0], keys[0]);
  WorkPublishItem wrong = item;
  wrong.checksum ^= 1;
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{wrong}),
            std::vector<BlockCode>{BlockCode::kBadChecksum});
  EXPECT_EQ(c->Lookup(keys)->hit_blocks, 0u);
  EXPECT_EQ(LeasesHeld(*c), 0u);
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item}),
            std::vector<BlockCode>{BlockCode::kOk});
  ASSERT_TRUE(c->Release(keys).ok());
  auto reader = Connect("reader");
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(CheckAll(*reader, keys).ok());
}

// A key already cached in T1 (put by another client): publishing it is AlreadyPresent, the cached
// block keeps its bytes, and the slot is still the writer's, to free (or reuse).
TEST_F(KvtierdWorkingSlotsTest, PublishingAKeyAlreadyCachedIsAlreadyPresentAndTheSlotIsFreed) {
  StartDaemon();
  auto putter = Connect("putter");
  auto c = Connect("worker");
  ASSERT_TRUE(putter != nullptr && c != nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*c, 4, 1);
  ASSERT_EQ(*testing::PutKeys(*putter, keys), std::vector<BlockCode>{BlockCode::kOk});
  const uint64_t used = UsedT1(*c);
  const std::vector<uint32_t> slots = TakeT1(*c, 1);
  ASSERT_EQ(slots.size(), 1u);
  WorkPublishItem item = Fill(*c, slots[0], keys[0]);
  std::memset(c->MutableSlotData(slots[0]), 0x5A, item.payload_bytes);  // other bytes
  item.checksum = PayloadChecksum(c->MutableSlotData(slots[0]), item.payload_bytes);
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item}),
            std::vector<BlockCode>{BlockCode::kAlreadyPresent});
  EXPECT_EQ(LeasesHeld(*c), 0u);
  EXPECT_TRUE(CheckAll(*c, keys).ok()) << "the block cached first is served";
  EXPECT_EQ(UsedT1(*c), used + 1) << "the slot is still held";
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, slots), std::vector<BlockCode>{BlockCode::kOk});
  EXPECT_EQ(UsedT1(*c), used);
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, slots), std::vector<BlockCode>{BlockCode::kMissing});
}

// A slot named twice in one publish or free: the first decides, the repeat is Missing. A slot of
// another client is Missing to this one and stays that client's.
TEST_F(KvtierdWorkingSlotsTest, RepeatedAndForeignSlotsAreMissing) {
  StartDaemon();
  auto c = Connect("one");
  auto other = Connect("two");
  ASSERT_TRUE(c != nullptr && other != nullptr);
  const std::vector<BlockKey> keys = SeqKeys(*c, 5, 2);
  const std::vector<uint32_t> mine = TakeT1(*c, 2);
  const std::vector<uint32_t> theirs = TakeT1(*other, 1);
  ASSERT_TRUE(mine.size() == 2 && theirs.size() == 1);
  const uint64_t used = UsedT1(*c);

  const WorkPublishItem item = Fill(*c, mine[0], keys[0]);
  WorkPublishItem repeat = item;
  repeat.key = keys[1];  // the same slot under another key
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item, repeat}),
            (std::vector<BlockCode>{BlockCode::kOk, BlockCode::kMissing}));
  EXPECT_EQ(c->Lookup(std::vector<BlockKey>{keys[1]})->hit_blocks, 0u);
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, std::vector<uint32_t>{mine[1], mine[1]}),
            (std::vector<BlockCode>{BlockCode::kOk, BlockCode::kMissing}));
  EXPECT_EQ(UsedT1(*c), used - 1) << "freed once";
  // The published slot is a cached block now, not a working slot.
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, std::vector<uint32_t>{mine[0]}),
            std::vector<BlockCode>{BlockCode::kMissing});

  // Another client's slot: Missing to publish and to free, and still the other's.
  WorkPublishItem foreign = Fill(*c, theirs[0], keys[1]);
  EXPECT_EQ(*c->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{foreign}),
            std::vector<BlockCode>{BlockCode::kMissing});
  EXPECT_EQ(*c->FreeWorking(Tier::kT1, theirs), std::vector<BlockCode>{BlockCode::kMissing});
  EXPECT_EQ(c->Lookup(std::vector<BlockKey>{keys[1]})->hit_blocks, 0u);
  EXPECT_EQ(*other->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{foreign}),
            std::vector<BlockCode>{BlockCode::kOk});
  ASSERT_TRUE(c->Release(std::vector<BlockKey>{keys[0]}).ok());
  ASSERT_TRUE(other->Release(std::vector<BlockKey>{keys[1]}).ok());
  EXPECT_TRUE(CheckAll(*c, keys).ok());
  EXPECT_EQ(c->Stats()->requests_invalid, 0u);
}

// A client that goes away — its process exiting with the client open, SIGKILLed, or the Client
// destroyed — gives back its working slots (T1 occupancy returns to where it was) and the leases
// on what it published (those blocks stay cached, unleased: droppable).
TEST_F(KvtierdWorkingSlotsTest, AClientThatGoesAwayGivesBackItsWorkingSlots) {
  StartDaemon();
  auto observer = Connect("observer");
  ASSERT_NE(observer, nullptr);
  enum class End { kExit, kSigkill, kDestroyed };
  for (End end : {End::kExit, End::kSigkill, End::kDestroyed}) {
    const std::string what = end == End::kExit      ? "process exit"
                             : end == End::kSigkill ? "SIGKILL"
                                                    : "Client destroyed";
    const uint64_t used = UsedT1(*observer);
    const std::vector<BlockKey> keys = SeqKeys(*observer, 60 + static_cast<int>(end), 1);
    // Holds 5 working slots and one published block (leased), then goes away as `end` says.
    auto hold = [&](client::Client& c) {
      auto taken = c.TakeWorkingSlots(Tier::kT1, 6);
      if (!taken.ok() || Codes(*taken) != std::vector<BlockCode>(6, BlockCode::kOk)) return false;
      const WorkPublishItem item = Fill(c, (*taken)[5].slot, keys[0]);
      auto published = c.PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{item});
      return published.ok() && *published == std::vector<BlockCode>{BlockCode::kOk};
    };
    if (end == End::kDestroyed) {
      auto c = Connect("leaver");
      ASSERT_NE(c, nullptr);
      ASSERT_TRUE(hold(*c)) << what;
      EXPECT_EQ(UsedT1(*observer), used + 6) << what;
      EXPECT_EQ(LeasesHeld(*observer), 1u) << what;
      c.reset();
    } else {
      testing::Pipe held, go;
      const pid_t child = testing::RunChild([&] {
        auto c = testing::ConnectTo(*daemon_, ItNamespace(), "leaver");
        if (!c.ok() || !hold(**c)) return 1;
        held.Signal();
        if (!go.Await()) return 2;
        if (end == End::kSigkill) ::raise(SIGKILL);
        ::_exit(0);  // the client is never closed: the kernel closes its socket
      });
      ASSERT_TRUE(held.Await()) << what << ": the child failed\n" << daemon_->Log();
      EXPECT_EQ(UsedT1(*observer), used + 6) << what;
      EXPECT_EQ(LeasesHeld(*observer), 1u) << what;
      go.Signal();
      const int status = testing::WaitChild(child);
      EXPECT_TRUE(end == End::kSigkill ? WIFSIGNALED(status) : testing::ExitedZero(status))
          << what << ": " << testing::DescribeWaitStatus(status);
    }
    EXPECT_TRUE(testing::Eventually([&] {
      return UsedT1(*observer) == used + 1 && LeasesHeld(*observer) == 0;
    })) << what
        << ": " << UsedT1(*observer) << " T1 slots used, " << used + 1 << " expected\n"
        << daemon_->Log();
    EXPECT_TRUE(CheckAll(*observer, keys).ok()) << what << ": the published block stays cached";
    EXPECT_EQ(Codes(*observer->Drop(keys)), std::vector<BlockCode>{BlockCode::kOk}) << what;
    EXPECT_EQ(UsedT1(*observer), used) << what;
  }
}

// ---- tier 0 against a daemon without T0 ----

protocol::UniqueFd RawConnect(const std::string& path) {
  protocol::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval guard{60, 0};  // a hang guard: a daemon that never answers fails the test
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
  return fd;
}

// A hand-made client past its handshake: it pushes whatever records it likes.
struct RawClient {
  protocol::UniqueFd socket;
  std::unique_ptr<protocol::ShmRegion> region;
  std::unique_ptr<protocol::EventFd> daemon_bell;
};

RawClient Handshake(const std::string& path) {
  RawClient raw;
  raw.socket = RawConnect(path);
  EXPECT_TRUE(
      protocol::SendFrame(raw.socket.get(), *protocol::EncodeHello({ItNamespace(), "raw"})).ok());
  auto frame = protocol::RecvFrame(raw.socket.get(), protocol::kWelcomeFdCount);
  EXPECT_TRUE(frame.ok()) << frame.status();
  if (!frame.ok()) return raw;
  auto welcome = protocol::DecodeWelcome(frame->payload);
  EXPECT_TRUE(welcome.ok()) << welcome.status();
  raw.region =
      *protocol::ShmRegion::Map(std::move(frame->fds[protocol::kFdRegion]), welcome->layout);
  raw.daemon_bell =
      std::make_unique<protocol::EventFd>(std::move(frame->fds[protocol::kFdDaemonBell]));
  return raw;
}

// The Error frame the daemon sends (code and text; nullopt when none), and whether it then closed.
struct Answer {
  std::optional<absl::StatusCode> error;
  std::string message;
  bool closed = false;
};

Answer ReadAnswer(int fd) {
  Answer a;
  absl::StatusOr<protocol::ReceivedFrame> frame = protocol::RecvFrame(fd, 0);
  if (frame.ok() && frame->info.type == protocol::FrameType::kError) {
    auto error = protocol::DecodeError(frame->payload);
    if (error.ok()) {
      a.error = error->code;
      a.message = error->message;
    }
    frame = protocol::RecvFrame(fd, 0);
  }
  a.closed = !frame.ok() && frame.status().code() == absl::StatusCode::kUnavailable;
  return a;
}

// The client refuses tier 0 itself when the daemon's Welcome has no T0 (InvalidArgument naming
// the call and the tier; the connection stays usable, so nothing reached the daemon, which would
// have closed it). Records sent raw with tier 0 — a work_take and a put_begin — are answered with
// an Error naming the request and its op, and only that connection is closed.
TEST_F(KvtierdWorkingSlotsTest, Tier0WithoutT0IsRefusedByTheClientAndByTheDaemon) {
  StartDaemon();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_FALSE(c->t0().has_value());
  const std::vector<BlockKey> keys = SeqKeys(*c, 7, 1);
  ASSERT_EQ(*testing::PutKeys(*c, keys), std::vector<BlockCode>{BlockCode::kOk});
  const uint32_t bytes = testing::PayloadBytes(keys[0]);
  const std::vector<BlockKey> new_keys = SeqKeys(*c, 8, 1);
  const protocol::PutBeginItem begin{new_keys[0], std::nullopt, bytes};
  const WorkPublishItem publish{new_keys[0], std::nullopt, 1, 0, bytes};
  const std::vector<std::pair<std::string, absl::Status>> refused = {
      {"TakeWorkingSlots", c->TakeWorkingSlots(Tier::kT0, 1).status()},
      {"PutBegin", c->PutBegin(std::vector<protocol::PutBeginItem>{begin}, Tier::kT0).status()},
      {"PublishWorking",
       c->PublishWorking(Tier::kT0, std::vector<WorkPublishItem>{publish}).status()},
      {"FreeWorking", c->FreeWorking(Tier::kT0, std::vector<uint32_t>{0}).status()},
  };
  for (const auto& [call, status] : refused) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << call << ": " << status;
    EXPECT_TRUE(absl::StrContains(status.message(), call + ": tier T0")) << status;
  }
  EXPECT_TRUE(CheckAll(*c, keys).ok()) << "the connection is still served";
  EXPECT_EQ(c->Stats()->requests_invalid, 0u) << "nothing reached the daemon";

  struct Case {
    protocol::Op op;
    std::string name;
  };
  uint64_t invalid = 0;
  for (const Case& k :
       {Case{protocol::Op::kWorkTake, "work_take"}, Case{protocol::Op::kPutBegin, "put_begin"}}) {
    RawClient raw = Handshake(daemon_->socket_path());
    ASSERT_NE(raw.region, nullptr) << daemon_->Log();
    const uint32_t arg = protocol::ArgBytes(k.op, 1);
    const protocol::Request request{
        k.op,     41,
        1,        static_cast<uint8_t>(Tier::kT0),
        {0, arg}, {(arg + 63) / 64 * 64, protocol::ResultBytes(k.op, 1)}};
    if (k.op == protocol::Op::kPutBegin) {
      protocol::WritePutBegin(raw.region->arena(), request.arg,
                              std::vector<protocol::PutBeginItem>{begin});
    }
    std::byte record[protocol::kRecordBytes];
    protocol::EncodeRequest(request, record);
    protocol::RingProducer producer(raw.region->submission(), raw.daemon_bell.get());
    ASSERT_TRUE(*producer.TryPush(record)) << k.name;
    const Answer a = ReadAnswer(raw.socket.get());
    EXPECT_EQ(a.error, absl::StatusCode::kInvalidArgument) << k.name << ": " << a.message;
    EXPECT_TRUE(absl::StrContains(a.message, "request 41 (" + k.name + "): tier 0")) << a.message;
    EXPECT_TRUE(absl::StrContains(a.message, "without T0")) << a.message;
    EXPECT_TRUE(a.closed) << k.name;
    ++invalid;
    // The well-behaved client is served, sees its block whole, and a new client is welcome.
    EXPECT_TRUE(CheckAll(*c, keys).ok()) << k.name;
    EXPECT_EQ(c->Stats()->requests_invalid, invalid) << k.name;
    EXPECT_NE(Connect("fresh"), nullptr) << k.name;
  }
  EXPECT_EQ(c->Lookup(new_keys)->hit_blocks, 0u);
}

// ---- down to T2 and back ----

// Published T1 blocks, released, are written to T2 by flush_on_stop at SIGTERM with the checksum
// given at publish, and served byte for byte from T2 after a restart. A block published with a
// wrong checksum (verify_puts off: the daemon believes it) is dropped when T2 checks it against
// its bytes, never persisted nor served after the restart. A key then cached only in T2 gains a
// T1 copy when a working slot is published under it.
TEST(KvtierdWorkingSlotsRestartTest, PublishedBlocksReachT2WithTheirChecksumAndServeAfterRestart) {
  testing::TempDir dir;
  std::vector<std::string> flags = kBaseFlags;
  for (const char* f : {"--daemon.flush_on_stop", "true", "--daemon.verify_puts", "false"}) {
    flags.push_back(f);
  }
  auto daemon = KvtierdProcess::Start(dir.path(), flags);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::vector<BlockKey> keys, bad_keys;
  {
    auto c = testing::ConnectTo(**daemon, ItNamespace(), "writer");
    ASSERT_TRUE(c.ok()) << c.status();
    keys = SeqKeys(**c, 9, 3);
    bad_keys = SeqKeys(**c, 10, 1);
    auto taken = (*c)->TakeWorkingSlots(Tier::kT1, 4);
    ASSERT_TRUE(taken.ok()) << taken.status();
    ASSERT_EQ(Codes(*taken), std::vector<BlockCode>(4, BlockCode::kOk));
    std::vector<WorkPublishItem> items;
    for (size_t i = 0; i < keys.size(); ++i) {
      items.push_back(Fill(**c, (*taken)[i].slot, keys[i],
                           i == 0 ? std::nullopt : std::optional<BlockKey>(keys[i - 1])));
    }
    WorkPublishItem bad = Fill(**c, (*taken)[3].slot, bad_keys[0]);
    bad.checksum ^= 0x100;
    items.push_back(bad);
    EXPECT_EQ(*(*c)->PublishWorking(Tier::kT1, items), std::vector<BlockCode>(4, BlockCode::kOk));
    std::vector<BlockKey> all = keys;
    all.push_back(bad_keys[0]);
    ASSERT_TRUE((*c)->Release(all).ok());
    auto hit = (*c)->Lookup(keys);
    ASSERT_TRUE(hit.ok() && hit->hit_blocks == keys.size());
    for (TierMask m : hit->tiers) EXPECT_EQ(m, TierBit(Tier::kT1)) << "in T1 only before the stop";
  }
  const int status = (*daemon)->Stop(SIGTERM);
  EXPECT_TRUE(testing::ExitedZero(status)) << testing::DescribeWaitStatus(status);
  const std::string log = (*daemon)->Log();
  EXPECT_TRUE(absl::StrContains(log, "flushed T1: 3 blocks written to T2")) << log;
  EXPECT_TRUE(absl::StrContains(log, "no longer matches the checksum given at commit")) << log;

  daemon = KvtierdProcess::Start(dir.path(), flags);
  ASSERT_TRUE(daemon.ok()) << daemon.status() << "\nlog before the restart:\n" << log;
  auto c = testing::ConnectTo(**daemon, ItNamespace(), "reader");
  ASSERT_TRUE(c.ok()) << c.status();
  auto hit = (*c)->Lookup(keys);
  ASSERT_TRUE(hit.ok()) << hit.status();
  ASSERT_EQ(hit->hit_blocks, keys.size()) << (*daemon)->Log();
  for (TierMask m : hit->tiers) EXPECT_EQ(m, TierBit(Tier::kT2));
  EXPECT_EQ((*c)->Lookup(bad_keys)->hit_blocks, 0u) << "a block that failed its checksum";
  // Lookups only (a get would promote into T1): the first block gains a T1 copy by publish.
  const std::vector<uint32_t> slot = {(*(*c)->TakeWorkingSlots(Tier::kT1, 1))[0].slot};
  const WorkPublishItem again = Fill(**c, slot[0], keys[0]);
  EXPECT_EQ(*(*c)->PublishWorking(Tier::kT1, std::vector<WorkPublishItem>{again}),
            std::vector<BlockCode>{BlockCode::kOk});
  EXPECT_EQ((*c)->Lookup(keys)->tiers[0], TierBit(Tier::kT1) | TierBit(Tier::kT2));
  ASSERT_TRUE((*c)->Release(std::vector<BlockKey>{keys[0]}).ok());
  const absl::Status check = CheckAll(**c, keys);
  EXPECT_TRUE(check.ok()) << check << "\n" << (*daemon)->Log();
  EXPECT_EQ((*c)->Stats()->leases_held, 0u);
  c->reset();
  const int second = (*daemon)->Stop(SIGTERM);
  EXPECT_TRUE(testing::ExitedZero(second)) << testing::DescribeWaitStatus(second);
}

}  // namespace
}  // namespace kvtier
