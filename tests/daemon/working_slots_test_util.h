// Helpers for the working-slot tests that run real kvtierd processes
// (kvtierd_working_slots_test.cc, kvtierd_working_slots_tier_test.cc): the daemon's flags, a T1
// working slot filled through the client's own mapping of T1 with its Payload, occupancy and
// leases from the stats op, and a fixture that starts one daemon and stops it cleanly.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "tests/daemon/kvtierd_test_util.h"

namespace kvtier::testing {

using protocol::BlockResult;
using protocol::WorkPublishItem;

// T1 of 256 slots of 16 KiB, T2 of 256: nothing in these tests is evicted.
inline const std::vector<std::string> kWorkFlags = {
    "--t1.capacity_bytes", "4MiB", "--t1.slot_bytes", "16KiB", "--t1.dma_chunk_bytes", "1MiB",
    "--t1.touch_threads",  "1",    "--t1.huge_pages", "off",   "--t2.capacity_bytes",  "4MiB"};

inline std::vector<BlockCode> Codes(const std::vector<BlockResult>& results) {
  std::vector<BlockCode> codes;
  for (const BlockResult& r : results) codes.push_back(static_cast<BlockCode>(r.code));
  return codes;
}

// Fills working slot `slot` of T1 with Payload(key) through c's mapping of T1; the item that
// publishes it with the right checksum.
inline WorkPublishItem Fill(client::Client& c, uint32_t slot, const BlockKey& key,
                            const std::optional<BlockKey>& parent = std::nullopt) {
  const std::vector<std::byte> payload = Payload(key);
  std::memcpy(c.MutableSlotData(slot), payload.data(), payload.size());
  return WorkPublishItem{key, parent, PayloadChecksum(payload.data(), payload.size()), slot,
                         static_cast<uint32_t>(payload.size())};
}

// T1 slots in use (cached blocks, open puts and working slots of every client).
inline uint64_t UsedT1(client::Client& c) {
  auto s = c.Stats();
  return s.ok() ? s->t1_slots_total - s->t1_slots_free : ~uint64_t{0};
}

inline uint64_t LeasesHeld(client::Client& c) {
  auto s = c.Stats();
  return s.ok() ? s->leases_held : ~uint64_t{0};
}

class KvtierdWorkingSlotsTest : public ::testing::Test {
 protected:
  void StartDaemon(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = kWorkFlags;
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto d = KvtierdProcess::Start(dir_.path(), flags);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // Whatever the test did to it, the daemon stops cleanly on SIGTERM (under ASan: nothing leaked).
  void TearDown() override {
    if (daemon_ == nullptr) return;
    const int status = daemon_->Stop(SIGTERM);
    EXPECT_TRUE(ExitedZero(status)) << "after SIGTERM: " << DescribeWaitStatus(status) << "\n"
                                    << daemon_->Log();
  }

  std::unique_ptr<client::Client> Connect(const std::string& name = "work") {
    auto c = ConnectTo(*daemon_, ItNamespace(), name);
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

  TempDir dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
};

}  // namespace kvtier::testing
