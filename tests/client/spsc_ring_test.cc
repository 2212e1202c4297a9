// The shared-memory ring's edges in one process: empty and full, wrap-around, the sleep flag
// handshake (a bell is rung only for a sleeping peer, once per sleep), and a peer that corrupts
// the indices.
#include "client/protocol/spsc_ring.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>

#include "client/protocol/shm_region.h"

namespace kvtier::protocol {
namespace {

struct Record {
  uint64_t words[8];
};
static_assert(sizeof(Record) == kRecordBytes);

Record Numbered(uint64_t n) {
  Record r;
  for (int i = 0; i < 8; ++i) r.words[i] = n * 8 + i;
  return r;
}

// The address of a temporary that lives until the end of the full expression.
const Record* Ptr(const Record& r) { return &r; }

class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<RegionLayout> layout = ComputeLayout(4, 4, 4096);
    ASSERT_TRUE(layout.ok());
    auto region = ShmRegion::Create(*layout);
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = std::move(*region);
    producer_bell_ = std::make_unique<EventFd>(*EventFd::Create());
    consumer_bell_ = std::make_unique<EventFd>(*EventFd::Create());
  }
  RingProducer Producer() { return RingProducer(region_->submission(), consumer_bell_.get()); }
  RingConsumer Consumer() { return RingConsumer(region_->submission(), producer_bell_.get()); }
  RingControl& Control() { return *region_->submission().control; }

  std::unique_ptr<ShmRegion> region_;
  std::unique_ptr<EventFd> producer_bell_, consumer_bell_;
};

TEST_F(RingTest, EmptyRingPopsNothingAndFullRingPushesNothing) {
  RingProducer p = Producer();
  RingConsumer c = Consumer();
  Record r;
  EXPECT_FALSE(*c.TryPop(&r));
  for (uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(*p.TryPush(Ptr(Numbered(i)))) << i;
  EXPECT_FALSE(*p.TryPush(Ptr(Numbered(99))));
  ASSERT_TRUE(*c.TryPop(&r));
  EXPECT_EQ(r.words[0], 0u);
  EXPECT_TRUE(*p.TryPush(Ptr(Numbered(4))));
  EXPECT_FALSE(*p.TryPush(Ptr(Numbered(99))));
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(*c.TryPop(&r));
    EXPECT_EQ(0, std::memcmp(&r, Ptr(Numbered(i)), sizeof(r))) << i;
  }
  EXPECT_FALSE(*c.TryPop(&r));
}

TEST_F(RingTest, RecordsComeOutInOrderAcrossManyWrapArounds) {
  RingProducer p = Producer();
  RingConsumer c = Consumer();
  uint64_t pushed = 0, popped = 0;
  Record r;
  while (popped < 10000) {
    while (pushed < 10000 && *p.TryPush(Ptr(Numbered(pushed)))) ++pushed;
    for (int k = 0; k < 3 && *c.TryPop(&r); ++k, ++popped) {
      ASSERT_EQ(0, std::memcmp(&r, Ptr(Numbered(popped)), sizeof(r))) << popped;
    }
  }
  EXPECT_EQ(Control().head, 10000u);
  EXPECT_EQ(Control().tail, 10000u);
}

TEST_F(RingTest, BellRingsOnlyWhenThePeerSleeps) {
  RingProducer p = Producer();
  RingConsumer c = Consumer();
  ASSERT_TRUE(*p.TryPush(Ptr(Numbered(0))));
  EXPECT_FALSE(consumer_bell_->Drain());  // the consumer was busy: no wake, no syscall's worth
  Record r;
  ASSERT_TRUE(*c.TryPop(&r));
  EXPECT_FALSE(producer_bell_->Drain());

  ASSERT_TRUE(*c.PrepareToSleep());  // empty: may sleep, flag set
  EXPECT_EQ(Control().consumer_sleeping, 1u);
  ASSERT_TRUE(*p.TryPush(Ptr(Numbered(1))));
  EXPECT_TRUE(consumer_bell_->Drain());
  c.EndSleep();
  EXPECT_EQ(Control().consumer_sleeping, 0u);
  EXPECT_FALSE(*c.PrepareToSleep());  // a record is waiting: do not sleep, flag cleared
  EXPECT_EQ(Control().consumer_sleeping, 0u);

  Control().producer_sleeping = 1;  // as Push does on a full ring
  ASSERT_TRUE(*c.TryPop(&r));
  EXPECT_TRUE(producer_bell_->Drain());
  EXPECT_EQ(p.bells_rung(), 1u);  // only for the one push that found the consumer asleep
  EXPECT_EQ(c.bells_rung(), 1u);
}

TEST_F(RingTest, ABurstPushedToASleepingPeerRingsItOnce) {
  RingProducer p = Producer();
  RingConsumer c = Consumer();
  ASSERT_TRUE(*c.PrepareToSleep());
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(*p.TryPush(Ptr(Numbered(i))));
  EXPECT_EQ(p.bells_rung(), 1u);  // the first push lowered the flag; the other three saw it down
  EXPECT_EQ(Control().consumer_sleeping, 0u);
  EXPECT_TRUE(consumer_bell_->Drain());
  c.EndSleep();
  Record r;
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(*c.TryPop(&r));
  ASSERT_TRUE(*c.PrepareToSleep());  // the next sleep is announced again, and rung again
  ASSERT_TRUE(*p.TryPush(Ptr(Numbered(4))));
  EXPECT_EQ(p.bells_rung(), 2u);
}

TEST_F(RingTest, BlockingPopReturnsRecordsAlreadyThere) {
  RingProducer p = Producer();
  RingConsumer c = Consumer();
  ASSERT_TRUE(p.Push(Ptr(Numbered(7)), *producer_bell_).ok());
  Record r;
  ASSERT_TRUE(c.Pop(&r, *consumer_bell_).ok());
  EXPECT_EQ(r.words[0], 56u);
}

TEST_F(RingTest, ImpossibleIndicesFromThePeerAreDataLoss) {
  {
    RingConsumer c = Consumer();
    Control().head = 5;  // 5 records in a ring of 4
    Record r;
    EXPECT_EQ(c.TryPop(&r).status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(c.PrepareToSleep().status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(Control().consumer_sleeping, 0u);
    Control().head = ~uint64_t{0};  // "behind" the tail
    EXPECT_EQ(c.TryPop(&r).status().code(), absl::StatusCode::kDataLoss);
  }
  Control().head = 0;
  RingProducer p = Producer();
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(*p.TryPush(Ptr(Numbered(i))));
  Control().tail = 9;  // ahead of the head
  EXPECT_EQ(p.TryPush(Ptr(Numbered(4))).status().code(), absl::StatusCode::kDataLoss);
}

// Two threads over one ring, each sleeping whenever it waits: the same protocol as between two
// processes, but visible to ThreadSanitizer (the tsan preset runs it), which checks that the
// release/acquire pairs and fences order every record copy.
TEST_F(RingTest, ConcurrentThreadsPassEveryRecordInOrder) {
  constexpr uint64_t kRecords = 200'000;
  std::thread consumer_thread([&] {
    RingConsumer c = Consumer();
    Record r;
    for (uint64_t i = 0; i < kRecords; ++i) {
      ASSERT_TRUE(c.Pop(&r, *consumer_bell_, i % 2 ? 100 : 0).ok());
      ASSERT_EQ(0, std::memcmp(&r, Ptr(Numbered(i)), sizeof(r))) << i;
    }
  });
  RingProducer p = Producer();
  for (uint64_t i = 0; i < kRecords; ++i) {
    ASSERT_TRUE(p.Push(Ptr(Numbered(i)), *producer_bell_, i % 3 ? 100 : 0).ok());
  }
  consumer_thread.join();
  EXPECT_EQ(Control().tail, kRecords);
}

}  // namespace
}  // namespace kvtier::protocol
