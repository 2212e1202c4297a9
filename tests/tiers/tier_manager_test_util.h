// Helpers for the tier manager tests: small real tiers (a memfd T1, a T2 on real files with real
// io_uring and RocksDB), and synchronous put/get over the manager's asynchronous API.
#pragma once

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/tiers/nvme_test_util.h"
#include "tiers/tier_manager.h"

namespace kvtier::testing {

inline constexpr uint32_t kTestSlot = 64 << 10;

// T1 of `t1_slots` slots; T2 of `t2_slots` slots in `t2_dir` (none if empty).
inline TierManagerOptions ManagerOptions(uint32_t t1_slots, const std::string& t2_dir,
                                         uint32_t t2_slots) {
  TierManagerOptions o;
  o.t1.capacity_bytes = uint64_t{kTestSlot} * t1_slots;
  o.t1.slot_bytes = kTestSlot;
  o.t1.dma_chunk_bytes = kTestSlot;
  o.t1.touch_threads = 1;
  o.t1.huge_pages = HugePages::kOff;
  o.t1_policy.high_watermark = 1.0;  // tests that want the evictor early lower these
  o.t1_policy.low_watermark = 0.75;
  if (!t2_dir.empty()) o.t2 = SmallOptions(t2_dir, kTestSlot, t2_slots);
  o.t2_policy.high_watermark = 1.0;
  o.t2_policy.low_watermark = 0.9;
  return o;
}

// Block i's payload size: varies from 1 byte to a whole slot.
inline uint32_t SizeOf(uint64_t i) {
  static constexpr uint32_t kSizes[] = {kTestSlot, 4096, 1, 12345, kTestSlot - 1, 40000};
  return kSizes[i % (sizeof(kSizes) / sizeof(kSizes[0]))];
}

// Puts block i (KeyOf(i), FillPayload(i)), retrying while T1 is full. Returns the outcome.
inline absl::StatusOr<CommitOutcome> Put(TierManager& m, uint64_t i,
                                         const BlockKey* parent = nullptr) {
  absl::StatusOr<SlotId> slot = m.AllocateForPut();
  for (int tries = 0; !slot.ok() && tries < 1000; ++tries) {
    if (slot.status().code() != absl::StatusCode::kResourceExhausted) return slot.status();
    m.Quiesce();
    slot = m.AllocateForPut();
  }
  if (!slot.ok()) return slot.status();
  const uint32_t bytes = SizeOf(i);
  auto* data = reinterpret_cast<uint8_t*>(m.t1().SlotData(*slot));
  FillPayload(i, data, bytes);
  PutCommit put{KeyOf(i), /*namespace_id=*/3, bytes, XXH3_64bits(data, bytes), parent};
  absl::StatusOr<CommitOutcome> outcome = m.CommitPut(put, *slot);
  if (!outcome.ok()) (void)m.AbortPut(*slot);
  return outcome;
}

inline absl::StatusOr<LeasedBlock> GetSync(TierManager& m, const BlockKey& key) {
  std::promise<absl::StatusOr<LeasedBlock>> p;
  m.Get(key, [&p](absl::StatusOr<LeasedBlock> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

// Gets block i, checks every byte against FillPayload(i), releases it. OK, or why not.
inline absl::Status GetAndVerify(TierManager& m, uint64_t i) {
  absl::StatusOr<LeasedBlock> block = GetSync(m, KeyOf(i));
  if (!block.ok()) return block.status();
  const uint32_t bytes = SizeOf(i);
  auto expected = Aligned(bytes);
  FillPayload(i, expected.get(), bytes);
  const bool same = block->payload_bytes == bytes &&
                    std::memcmp(m.t1().SlotData(block->slot), expected.get(), bytes) == 0;
  KVTIER_RETURN_IF_ERROR(m.Release(KeyOf(i)));
  if (!same) return absl::DataLossError("block " + std::to_string(i) + " came back different");
  return absl::OkStatus();
}

inline bool InTier(TierManager& m, uint64_t i, Tier tier) {
  std::optional<BlockInfo> info = m.index().Find(KeyOf(i));
  return info && info->InTier(tier);
}

// Records what TierManagerOptions::on_move reports. Must outlive the manager it observes.
class MoveLog {
 public:
  TierMoveObserver Observer() {
    return [this](const TierMove& move, double seconds) {
      std::lock_guard lock(mu_);
      moves_.push_back({move, seconds});
    };
  }
  // The durations reported for moves of this kind between these tiers, in order.
  std::vector<double> Seconds(MoveKind kind, Tier from, Tier to) const {
    std::lock_guard lock(mu_);
    std::vector<double> out;
    for (const auto& [move, seconds] : moves_) {
      if (move.kind == kind && move.from == from && move.to == to) out.push_back(seconds);
    }
    return out;
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return moves_.size();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<TierMove, double>> moves_;
};

}  // namespace kvtier::testing
